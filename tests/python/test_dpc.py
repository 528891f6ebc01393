"""The Python package's checks (tests/python/run.sh): OUT is the folder to write in."""
import json
import os
import subprocess
import sys
import tempfile
import traceback

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import dpc

out = sys.argv[1]
dpc_exe = os.environ["DPC"]
results = []


def check(name, cond, detail=""):
    print("%s - python: %s" % ("ok" if cond else "not ok", name))
    if not cond and detail:
        print("    " + str(detail).replace("\n", "\n    "))
    results.append(bool(cond))


def refused(name, fn, code, pat):
    try:
        fn()
    except dpc.Error as e:
        check(name, e.code == code and pat in str(e), "code %d, message: %s" % (e.code, e))
        return
    check(name, False, "no error")


def same(a, b):
    """two safetensors files' tensors: the same names, the same bits (the files name their models)"""
    x, y = dpc._read_safetensors(a), dpc._read_safetensors(b)
    return sorted(x) == sorted(y) and all(x[k].tobytes() == y[k].tobytes() for k in x)


def mlp(path, batch=8):
    """a two-layer classifier as an exporter writes one: Gemm, Relu, Gemm; the weights under module names"""
    r = np.random.default_rng(0)
    inits = [numpy_helper.from_array((r.standard_normal((4, 16)) * 0.5).astype(np.float32), "fc1.weight"),
             numpy_helper.from_array(np.zeros(16, np.float32), "fc1.bias"),
             numpy_helper.from_array((r.standard_normal((16, 3)) * 0.5).astype(np.float32), "fc2.weight"),
             numpy_helper.from_array(np.zeros(3, np.float32), "fc2.bias")]
    nodes = [helper.make_node("Gemm", ["x", "fc1.weight", "fc1.bias"], ["h"]),
             helper.make_node("Relu", ["h"], ["a"]),
             helper.make_node("Gemm", ["a", "fc2.weight", "fc2.bias"], ["logits"])]
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 4])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, 3])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def main():
    model = os.path.join(out, "mlp.onnx")
    mlp(model)
    r = np.random.default_rng(1)
    x = r.standard_normal((8, 4)).astype(np.float32)
    y = (np.arange(8) % 3).astype(np.int64)  # PyTorch's labels are int64: taken as i32
    np.save(os.path.join(out, "x.npy"), x)
    np.save(os.path.join(out, "y.npy"), y.astype(np.int32))

    # the executable on the same model, batch, seed and options
    exe = os.path.join(out, "mlp")
    subprocess.run([dpc_exe, model, "--optimizer", "adam", "-o", exe], check=True, capture_output=True)
    cli = os.path.join(out, "cli.safetensors")
    subprocess.run([exe, "--seed", "3", "--quiet", "--steps", "5", "--data", os.path.join(out, "x.npy"), "--labels",
                    os.path.join(out, "y.npy"), "--save", cli, "--summary-json", os.path.join(out, "cli.json")],
                   check=True, capture_output=True)

    summary, log = os.path.join(out, "py.json"), os.path.join(out, "py.log.jsonl")
    t = dpc.compile_file(model, optimizer="adam",
                         run=dict(seed=3, quiet=True, summary_json=summary, log_json=log, log_every=1))
    check("compile_file: the model's inputs, the labels the loss adds",
          [i["name"] for i in t.inputs] == ["x", "labels"] and t.inputs[1]["classes"] == 3, t.inputs)
    check("the parameters under the module's names",
          [p["file"] for p in t.params] == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"], t.params)
    check("trainer.plan is the schedule's (peak, bound, optimizer)",
          t.plan.get("optimizer") == "adam" and t.plan["peak_device_bytes"]["total"] > 0 and
          t.plan["peak_lower_bound"] <= t.plan["peak_device_bytes"]["total"], t.plan)

    losses = []
    for i in range(5):
        if i == 2:  # refusals between the steps change nothing
            refused("a wrong dtype: reals for labels", lambda: t.step(x, y.astype(np.float32)), 2,
                    "input 'labels' is i32, and the batch given is f32")
            refused("a wrong dtype: integers for reals", lambda: t.step(x.astype(np.int32), y), 2,
                    "input 'x' is f32, and the batch given is i32")
            refused("a wrong shape", lambda: t.step(x[:4], y), 2, "input 'x' has shape [8, 4], and the batch given has shape [4, 4]")
            refused("a name not in the model", lambda: t.put("z", x), 2, "no input named 'z' (its inputs: x, labels)")
            refused("a label out of range", lambda: t.step(x, y + 3), 2, "not a class in 0..2")
            refused("too many arrays", lambda: t.step(x, y, y), 2, "3 arrays given, and the model has 2 inputs")
            refused("a parameter not in the model", lambda: t.get("fc9.weight"), 2, "no parameter or buffer named 'fc9.weight'")
            refused("a save that cannot be written", lambda: t.save("/nonexistent-dir/p.safetensors"), 1, "/nonexistent-dir")
            w = t.get("fc1.weight")
            t.set("fc1.weight", w)
            check("get and set of a parameter", w.shape == (4, 16) and w.dtype == np.float32)
            check("Adam's moments by name", t.get("fc2.bias", "adam_v").min() >= 0)
        losses.append(t.step(x, y))
    check("five steps, the loss falls", losses[-1] < losses[0], losses)
    check("steps_done", t.steps_done == 5)
    py = os.path.join(out, "py.safetensors")
    t.save(py)
    check("the parameters after 5 steps are the executable's, byte for byte",
          open(py, "rb").read() == open(cli, "rb").read())
    sd = t.state_dict("numpy")
    want = dpc._read_safetensors(cli)
    check("state_dict: the module's names, the executable's values",
          sorted(sd) == sorted(want) and all(np.array_equal(sd[k], want[k]) for k in sd))
    ev = t.eval(x, y)
    check("eval: a finite loss, nothing updated", np.isfinite(ev) and t.steps_done == 5)
    t.close()
    refused("a closed trainer", lambda: t.step(x, y), 3, "closed")
    s = json.load(open(summary))
    c = json.load(open(os.path.join(out, "cli.json")))
    check("--summary through the API: the executable's steps and losses",
          s["steps"] == 5 and s["loss_first"] == c["loss_first"] and s["loss_last"] == c["loss_last"],
          (s.get("steps"), s.get("loss_first"), c.get("loss_first"), s.get("loss_last"), c.get("loss_last")))
    lines = [json.loads(l) for l in open(log)]
    check("--log-json through the API: a line a step", len(lines) == 5 and lines[-1]["step"] == 5, lines[-1:])

    # reals in the model's precision, as the executable reads a .npy file: f64 arrays into an f32 model,
    # f32 into a bf16-mixed one (rounded to nearest even), the executable's bits
    for prec, arr in (("f32", x.astype(np.float64)), ("bf16-mixed", x)):
        lib = os.path.join(out, "libmlp_%s.so" % prec)
        tp = dpc.compile_file(model, output=lib, precision=prec, optimizer="adam", run={"seed": 3, "quiet": True})
        for _ in range(3):
            tp.step(arr, y)
        tp.save(os.path.join(out, "prec_%s.safetensors" % prec))
        tp.close()
        subprocess.run([dpc_exe, model, "--precision", prec, "--optimizer", "adam", "-o", exe + "_" + prec], check=True,
                       capture_output=True)
        np.save(os.path.join(out, "x64.npy"), arr)
        subprocess.run([exe + "_" + prec, "--seed", "3", "--quiet", "--steps", "3", "--data", os.path.join(out, "x64.npy"),
                        "--labels", os.path.join(out, "y.npy"), "--save", os.path.join(out, "prec_cli_%s.safetensors" % prec)],
                       check=True, capture_output=True)
        check("%s arrays into a %s model: the executable's bits from the same .npy" % (arr.dtype, prec),
              same(os.path.join(out, "prec_%s.safetensors" % prec), os.path.join(out, "prec_cli_%s.safetensors" % prec)))

    # the progress line through the API: each --log-every steps; with no --steps no total and no ETA
    lines_of = {}
    for name, extra in (("open", {}), ("steps", {"steps": 4})):
        t5 = dpc.compile_file(model, output=os.path.join(out, "libprog_%s.so" % name), run=dict(log_every=2, **extra))
        path = os.path.join(out, "progress_%s.txt" % name)
        sys.stdout.flush()
        saved = os.dup(1)
        with open(path, "w") as f:
            os.dup2(f.fileno(), 1)  # the library prints to the process's stdout
            try:
                for _ in range(4):
                    t5.step(x, y)
            finally:
                os.dup2(saved, 1)
                os.close(saved)
        t5.close()
        lines_of[name] = [l for l in open(path) if l.startswith("step ")]
    o, w = lines_of["open"], lines_of["steps"]
    check("progress lines through the API at --log-every 2, open-ended: 'step 2', 'step 4', no ETA",
          [l.split()[1] for l in o] == ["2", "4"] and not any("ETA" in l for l in o), o)
    check("and with --steps 4: 'step 2/4', 'step 4/4' and the ETA",
          [l.split()[1] for l in w] == ["2/4", "4/4"] and all("ETA" in l for l in w), w)

    # --trace through the API: the steps it names, written at close
    trace = os.path.join(out, "trace.json")
    t4 = dpc.compile_file(model, output=os.path.join(out, "libtrace.so"),
                          run={"seed": 3, "quiet": True, "trace": trace, "trace_steps": "2:3"})
    for i in range(4):
        t4.step(x, y)
    t4.close()
    ev = json.load(open(trace))["traceEvents"]
    steps = {e["args"]["step"] for e in ev if e.get("ph") == "X"}
    check("--trace through the API: steps 2 and 3 traced", steps == {2, 3}, steps)
    refused("--trace through the API without the steps it traces",
            lambda: dpc.load(os.path.join(out, "libtrace.so"), run={"trace": trace}), 2, "--trace-steps")

    # a loader's batches: a generator of arrays, a step each
    t2 = dpc.compile_file(model, output=os.path.join(out, "libmlp.so"), run=["--seed", "4", "--quiet"])
    batches = [(r.standard_normal((8, 4)).astype(np.float32), r.integers(0, 3, 8)) for _ in range(20)]
    last = None
    for bx, by in batches:
        last = t2.step(bx, by)
    check("twenty batches from a loader", t2.steps_done == 20 and np.isfinite(last))
    t2.save(os.path.join(out, "loader.safetensors"))
    # the executable on the same batches one after another (--in-order: not shuffled)
    np.save(os.path.join(out, "xs.npy"), np.concatenate([b[0] for b in batches]))
    np.save(os.path.join(out, "ys.npy"), np.concatenate([b[1] for b in batches]).astype(np.int32))
    subprocess.run([dpc_exe, model, "-o", exe + "_sgd"], check=True, capture_output=True)
    subprocess.run([exe + "_sgd", "--seed", "4", "--quiet", "--steps", "20", "--in-order", "--data",
                    os.path.join(out, "xs.npy"), "--labels", os.path.join(out, "ys.npy"), "--save",
                    os.path.join(out, "cli_loader.safetensors")], check=True, capture_output=True)
    check("the loader's twenty batches give the executable's parameters (--in-order), bit for bit",
          same(os.path.join(out, "loader.safetensors"), os.path.join(out, "cli_loader.safetensors")))
    refused("a second session of the same library at once", lambda: dpc.load(os.path.join(out, "libmlp.so")), 3,
            "open in this process already")
    t2.close()
    t3 = dpc.load(os.path.join(out, "libmlp.so"), run={"seed": 4, "quiet": True})
    check("dpc.load: the library again, the plan beside it", t3.plan.get("optimizer") == "sgd")
    t3.close()

    # a resume that fails leaves the session as it was: the streamed parameters and their moments live in
    # the host pool, and a state whose last value is not finite fails after the tensors before it are read
    lib = os.path.join(out, "libres.so")
    res = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "samples", "resmlp.dp")
    a = dpc.compile_file(res, output=lib, stream="params", optimizer="adam", run={"seed": 5, "quiet": True})
    a.step(), a.step()
    state = os.path.join(out, "res.state")
    a.save_state(state)
    raw = bytearray(open(state, "rb").read())
    raw[-4:] = np.array([np.nan], np.float32).tobytes()
    bad_state = os.path.join(out, "res_bad.state")
    open(bad_state, "wb").write(bytes(raw))
    a.step(), a.step()  # past the state: what a half-read state would write differs from what is there
    before = {p["file"]: a.get(p["file"]).copy() for p in a.params}
    mom = a.get("W", "adam_m").copy()
    refused("a resume from a state with a value not finite", lambda: a.resume(bad_state), 1, "not a finite number")
    check("a failed resume leaves the parameters and moments as they were (streamed ones too)",
          all(np.array_equal(before[k], a.get(k)) for k in before) and np.array_equal(mom, a.get("W", "adam_m")))
    a.step()
    a.save(os.path.join(out, "res_after.safetensors"))
    a.close()
    b = dpc.load(lib, run={"seed": 5, "quiet": True})
    for _ in range(5):
        b.step()
    b.save(os.path.join(out, "res_plain.safetensors"))
    b.close()
    check("and the steps after it are a plain run's, bit for bit",
          same(os.path.join(out, "res_after.safetensors"), os.path.join(out, "res_plain.safetensors")))
    c = dpc.load(lib, run={"seed": 5, "quiet": True})
    c.resume(state)
    for _ in range(3):
        c.step()
    c.save(os.path.join(out, "res_resumed.safetensors"))
    c.close()
    check("a streamed model resumed at step 2: 3 more steps are the plain run's (5 steps)",
          same(os.path.join(out, "res_resumed.safetensors"), os.path.join(out, "res_plain.safetensors")))

    # the compiler's and the runtime's refusals, each leaving no temporary folder behind
    scratch = os.path.join(out, "tmp")
    os.makedirs(scratch, exist_ok=True)
    tempfile.tempdir = scratch
    refused("an option the compiler refuses", lambda: dpc.compile_file(model, checkpoint="sideways"), 2, "--checkpoint")
    refused("a budget below the least", lambda: dpc.compile_file(model, device_mem="1KB"), 1, "device")
    refused("a file that is not there", lambda: dpc.compile_file(os.path.join(out, "none.onnx")), 2, "no such file")
    refused("an option the runtime refuses", lambda: dpc.compile_file(model, run={"lr": "fast"}), 2, "--lr needs")
    bad = os.path.join(out, "bad.onnx")
    with open(bad, "wb") as f:
        f.write(b"not a model")
    refused("a malformed ONNX file: the converter's message", lambda: dpc.compile_file(bad), 2, "bad.onnx: not an ONNX model")
    tempfile.tempdir = None
    check("the refusals left no temporary folder", os.listdir(scratch) == [], os.listdir(scratch))


try:
    main()
except Exception:
    check("test_dpc.py ran to its end", False, traceback.format_exc())
print("%d passed, %d failed" % (sum(results), len(results) - sum(results)))
sys.exit(0 if all(results) else 1)
