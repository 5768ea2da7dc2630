// Model is shared and immutable; Session owns a KV cache sized once, and forward() never allocates.
#include <gtest/gtest.h>

#include "formats/import.h"
#include "runtime/session.h"
#include "test_util.h"

namespace kiln {
namespace {

std::shared_ptr<const Model> shipped() {
  auto imp = import_model(test::shipped_model());
  EXPECT_TRUE(imp) << imp.status().message();
  auto m = Model::create(std::move(imp->model));
  EXPECT_TRUE(m);
  return *m;
}

TEST(Session, KvCacheAllocatedOnceForContext) {
  auto model = shipped();
  auto s = Session::create(model, 128);
  ASSERT_TRUE(s);
  const auto& c = model->config();
  EXPECT_EQ((*s)->kv_cache_bytes(), 2u * c.n_layers * 128u * c.kv_dim() * sizeof(float));
}

TEST(Session, ForwardAllocatesNothing) {
  auto model = shipped();
  auto s = Session::create(model, 256);
  ASSERT_TRUE(s);
  ASSERT_TRUE((*s)->forward(1));  // warm: nothing lazy may hide in the first call either
  const uint64_t before = test::allocation_count();
  for (int i = 0; i < 200; ++i) {
    auto l = (*s)->forward(3 + i % 500);
    ASSERT_TRUE(l);
  }
  EXPECT_EQ(test::allocation_count(), before);
}

TEST(Session, ContextFullIsAnError) {
  auto s = Session::create(shipped(), 4);
  ASSERT_TRUE(s);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE((*s)->forward(1));
  auto r = (*s)->forward(1);
  ASSERT_FALSE(r);
  EXPECT_NE(r.status().message().find("full"), std::string::npos);
}

TEST(Session, ContextBeyondModelMaximumRefused) {
  auto model = shipped();
  auto s = Session::create(model, model->config().max_seq_len + 1);
  EXPECT_FALSE(s);
}

TEST(Session, BadTokenRefused) {
  auto s = Session::create(shipped(), 8);
  ASSERT_TRUE(s);
  EXPECT_FALSE((*s)->forward(-1));
  EXPECT_FALSE((*s)->forward(512));
}

TEST(Session, SessionsShareAModelIndependently) {
  auto model = shipped();
  auto a = Session::create(model, 32);
  auto b = Session::create(model, 32);
  ASSERT_TRUE(a && b);
  std::vector<float> la, lb;
  for (int t : {1, 403, 407}) {
    auto r = (*a)->forward(t);
    la.assign(r->begin(), r->end());
  }
  (*b)->forward(1);
  (*b)->forward(99);  // a different history must not disturb session a
  (*b)->reset();
  for (int t : {1, 403, 407}) {
    auto r = (*b)->forward(t);
    lb.assign(r->begin(), r->end());
  }
  EXPECT_EQ(la, lb);
}

}  // namespace
}  // namespace kiln

// The compiled path too: a ProgramSession step allocates nothing, for every scheme.
#include "compiler/driver.h"
#include "runtime/program_session.h"

namespace kiln {
namespace {

TEST(ProgramSession, DecodeAllocatesNothing) {
  for (const char* scheme : {"f32", "w4a16", "w8a8"}) {
    auto imp = import_model(test::shipped_model());
    CompileOptions o;
    o.quant = *overrides_from_flags(scheme, 32, true, true);
    auto img = compile_model(*imp, o, nullptr);
    ASSERT_TRUE(img) << img.status().message();
    auto m = CompiledModel::create(std::move(img).value());
    ASSERT_TRUE(m);
    auto s = ProgramSession::create(*m, 256);
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
