// A Session step over a compiled model allocates nothing, for every scheme.
#include <gtest/gtest.h>

#include "compiler/driver.h"
#include "formats/import.h"
#include "runtime/session.h"
#include "test_util.h"
#include "compiler/driver.h"
#include "runtime/session.h"

namespace kiln {
namespace {

TEST(Session, DecodeAllocatesNothing) {
  for (const char* scheme : {"f32", "w4a16", "w8a8"}) {
    auto imp = import_model(test::shipped_model());
    CompileOptions o;
    o.quant = *overrides_from_flags(scheme, 32, true, true);
    auto img = compile_model(*imp, o, nullptr);
    ASSERT_TRUE(img) << img.status().message();
    auto m = Model::create(std::move(img).value());
    ASSERT_TRUE(m);
    auto s = Session::create(*m, 256);
    ASSERT_TRUE(s);
    std::vector<int> prompt = {1, 403, 407, 261, 378};
    ASSERT_TRUE((*s)->decode(prompt));
    const uint64_t before = test::allocation_count();
    for (int i = 0; i < 100; ++i) {
      const int t = 3 + i % 500;
      ASSERT_TRUE((*s)->decode(std::span<const int>(&t, 1)));
    }
    ASSERT_TRUE((*s)->decode(prompt));
    EXPECT_EQ(test::allocation_count(), before) << scheme;
  }
}

}  // namespace
}  // namespace kiln
