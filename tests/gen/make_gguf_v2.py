#!/usr/bin/env python3
"""Generate tests/data/stories260K-gguf/stories260K-v2.gguf: the committed GGUF v3 stories260K
rewritten as GGUF v2 by gguf-py 0.4.4, the last gguf-py release whose writer writes version 2.

v2 and v3 lay out a little-endian file the same way (u64 counts and lengths since v2; v3 only
added big-endian files), so a v2 file is only worth testing if a real v2 writer made it: this
script reads every metadata key and tensor of the v3 file with current gguf-py's GGUFReader and
writes them again through gguf-py 0.4.4's GGUFWriter (in its own key order), then reads
the result back and checks that the version is 2 and that every key, type, value, tensor name,
shape, type and byte is the same as in the v3 file.

Usage (from the repository root):
    pip install numpy gguf                                      # current gguf-py, for the reader
    pip install --no-deps --target /tmp/gguf044 gguf==0.4.4     # the v2 writer, kept apart
    python3 tests/gen/make_gguf_v2.py --old-gguf /tmp/gguf044
Deterministic: two runs give byte-identical files.
"""
import argparse
import importlib.util
import os

import numpy as np
import gguf

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.normpath(os.path.join(HERE, "..", "data", "stories260K-gguf"))


def load_old_gguf(folder):
    # gguf-py 0.4.4 is one module; load it under another name so that it does not replace the reader.
    spec = importlib.util.spec_from_file_location("gguf_044", os.path.join(folder, "gguf", "gguf.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.GGUF_VERSION == 2, f"{folder}: gguf-py there writes version {mod.GGUF_VERSION}, not 2"
    return mod


def field_value(f):
    """(element type, value) of a reader field; strings stay bytes so that nothing is re-encoded."""
    T = gguf.GGUFValueType
    if f.types[0] == T.ARRAY:
        if f.types[1] == T.STRING:
            return [bytes(f.parts[i]) for i in f.data]
        return [f.parts[i][0].item() for i in f.data]
    if f.types[0] == T.STRING:
        return bytes(f.parts[f.data[0]])
    return f.parts[f.data[0]][0].item()


def metadata(reader):
    return {k: (tuple(int(t) for t in f.types), field_value(f))
            for k, f in reader.fields.items() if not k.startswith("GGUF.")}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--old-gguf", required=True, help="folder with gguf-py 0.4.4 installed (pip --target)")
    ap.add_argument("--src", default=os.path.join(DATA, "stories260K.gguf"))
    ap.add_argument("--out", default=os.path.join(DATA, "stories260K-v2.gguf"))
    args = ap.parse_args()
    old = load_old_gguf(args.old_gguf)
    src = gguf.GGUFReader(args.src)
    meta = metadata(src)

    arch = meta["general.architecture"][1].decode()
    w = old.GGUFWriter(args.out, arch, use_temp_file=False)  # writes general.architecture itself
    for key, (types, value) in meta.items():
        if key == "general.architecture":
            continue
        w.add_key(key)
        if types[0] == old.GGUFValueType.ARRAY:
            # The old writer infers the element type from Python values: bytes -> STRING,
            # float -> FLOAT32, int -> INT32; the check below catches any other element type.
            w.add_val(list(value), old.GGUFValueType.ARRAY)
        else:
            w.add_val(value, old.GGUFValueType(types[0]))
    for t in src.tensors:
        assert t.tensor_type == gguf.GGMLQuantizationType.F32, t.name
        w.add_tensor(t.name, np.ascontiguousarray(t.data))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    out = gguf.GGUFReader(args.out)
    version = out.fields["GGUF.version"].parts[-1][0]
    assert version == 2, f"wrote version {version}"
    assert metadata(out) == meta, "metadata differs"
    assert [t.name for t in out.tensors] == [t.name for t in src.tensors]
    for a, b in zip(src.tensors, out.tensors):
        assert a.tensor_type == b.tensor_type and list(a.shape) == list(b.shape), a.name
        assert a.data.tobytes() == b.data.tobytes(), a.name
    print(f"{args.out}: GGUF v2, {len(meta)} keys and {len(out.tensors)} tensors equal to {args.src}")


if __name__ == "__main__":
    main()
