#!/usr/bin/env python3
"""order_check.py DIR ORDER WINDOWS: the order in which a training run reads
its data (tests/train/order.dp and windows.dp, whose loss at each step is
what the step read). A .npy file of 16 rows is read in a new shuffled order
each epoch, drawn from the seed: every epoch a permutation, not the file's
order, the epochs' orders different, the same again with the same seed and
another with another seed; --eval reads the rows in turn; a run resumed from
its state reads on as the uninterrupted one. A text file is read as windows
at random offsets (not only at multiples of the row length), within the
text, again the same with the same seed. --val-data's loss, every
--eval-every steps and after the last, is the mean over its rows, and leaves
the training's losses as they were; with three inputs (three.dp), the
third's rows come from --val-input."""
import json, struct, subprocess, sys

d, order, windows, three = sys.argv[1:5]
header = "{'descr': '<f8', 'fortran_order': False, 'shape': (16, 1, ), }"
header += " " * (63 - (10 + len(header)) % 64) + "\n"
open(f"{d}/x.npy", "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() +
                               struct.pack("<16d", *range(16)))
open(f"{d}/text.bin", "wb").write(bytes(range(200)))


def run(exe, *args):
    subprocess.run([exe, "--lr", "0", "--quiet", "--log-json", f"{d}/log.json", *args], check=True, stdout=subprocess.DEVNULL)
    return [json.loads(line)["loss"] for line in open(f"{d}/log.json")]


rows = [int(v) for v in run(order, "--steps", "48", "--data", f"{d}/x.npy")]
epochs = [rows[i:i + 16] for i in range(0, 48, 16)]
assert all(sorted(e) == list(range(16)) for e in epochs), epochs
assert all(e != list(range(16)) for e in epochs), epochs
assert len({tuple(e) for e in epochs}) == 3, epochs
assert [int(v) for v in run(order, "--steps", "48", "--data", f"{d}/x.npy")] == rows
assert [int(v) for v in run(order, "--steps", "48", "--data", f"{d}/x.npy", "--seed", "5")] != rows
subprocess.run([order, "--eval", "--quiet", "--data", f"{d}/x.npy", "--summary-json", f"{d}/eval.json"], check=True,
               stdout=subprocess.DEVNULL)
assert json.load(open(f"{d}/eval.json"))["loss"] == 7.5  # every row once: the mean of 0..15
# resumed at step 21 (a constant rate: a shorter run's state continues a longer one)
run(order, "--steps", "21", "--data", f"{d}/x.npy", "--save-state", f"{d}/order.st")
rest = [int(v) for v in run(order, "--steps", "48", "--data", f"{d}/x.npy", "--resume", f"{d}/order.st")]
assert rest == rows[21:], (rest, rows[21:])
# validation every 5 steps and after the last: the mean over the val rows (0..15: 7.5), training untouched
subprocess.run([order, "--lr", "0", "--quiet", "--steps", "12", "--data", f"{d}/x.npy", "--val-data", f"{d}/x.npy",
                "--eval-every", "5", "--log-json", f"{d}/val.json", "--summary-json", f"{d}/val_sum.json"], check=True,
               stdout=subprocess.DEVNULL)
lines = [json.loads(line) for line in open(f"{d}/val.json")]
assert [l["step"] for l in lines if "val_loss" in l] == [5, 10, 12], lines
assert all(l["val_loss"] == 7.5 for l in lines if "val_loss" in l), lines
assert [int(l["loss"]) for l in lines] == rows[:12], (lines, rows[:12])
assert json.load(open(f"{d}/val_sum.json"))["val_loss"] == 7.5
# three inputs, all of which the loss computes from: each by name, --val-input (each 0..15, 15..0, all 2)
def npy(name, values):
    h = "{'descr': '<f8', 'fortran_order': False, 'shape': (16, 1, ), }"
    h += " " * (63 - (10 + len(h)) % 64) + "\n"
    open(f"{d}/{name}.npy", "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode() +
                                       struct.pack("<16d", *values))


npy("y", range(15, -1, -1))
npy("z", [2] * 16)
subprocess.run([three, "--lr", "0", "--quiet", "--steps", "4", "--val-input", f"x={d}/x.npy", "--val-input", f"y={d}/y.npy",
                "--val-input", f"z={d}/z.npy", "--summary-json", f"{d}/three.json"], check=True, stdout=subprocess.DEVNULL)
assert json.load(open(f"{d}/three.json"))["val_loss"] == 7.5 + 750 + 20000, json.load(open(f"{d}/three.json"))
# --accum 2: each step reads the next two rows of the order, its loss their mean
pairs = run(order, "--steps", "24", "--accum", "2", "--data", f"{d}/x.npy")
assert pairs == [(rows[2 * i] + rows[2 * i + 1]) / 2 for i in range(24)], (pairs, rows)
starts = [v - 1.5 for v in run(windows, "--steps", "40", "--data", f"{d}/text.bin")]
assert all(s == int(s) and 0 <= s <= 196 for s in starts), starts
assert any(int(s) % 4 for s in starts) and len(set(starts)) > 30, starts
assert [v - 1.5 for v in run(windows, "--steps", "40", "--data", f"{d}/text.bin")] == starts
print("epochs", [e[:4] for e in epochs], "windows at", [int(s) for s in starts[:6]])
