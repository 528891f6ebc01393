"""Writes .npy files without numpy: npy.py OUT DESCR SHAPE VALUES-EXPR [fortran]"""
import struct, sys

out, descr, shape = sys.argv[1], sys.argv[2], tuple(int(d) for d in sys.argv[3].split(",") if d)
n = 1
for d in shape:
    n *= d
values = eval(sys.argv[4], {"n": n, "i": None})
fortran = len(sys.argv) > 5
shape_txt = "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"
header = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, fortran, shape_txt)
header += " " * (63 - (10 + len(header)) % 64) + "\n"
fmt = {"<f4": "f", "<f8": "d", "<i4": "i", "<i8": "q", "<f2": "e"}[descr]
with open(out, "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
    f.write(struct.pack("<%d%s" % (len(values), fmt), *values))
