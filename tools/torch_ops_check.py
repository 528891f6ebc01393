#!/usr/bin/python3
"""The new ops' meaning against PyTorch, in float64: each tests/ops program
below is compiled (CPU, f64), run one step at random parameters and inputs,
and its loss and gradients compared with the same model in PyTorch.

usage: tools/torch_ops_check.py [WORKDIR]   (from the repository root;
needs numpy and torch: apt-get install python3-torch). Not part of make test,
which must run without PyTorch."""
import json, os, struct, subprocess, sys, numpy as np, torch, torch.nn.functional as F
torch.set_default_dtype(torch.float64)
D = sys.argv[1] if len(sys.argv) > 1 else '/tmp/torch_ops_check'
os.makedirs(D, exist_ok=True)
def write_st(path, d):
    hdr = {}; off = 0; blobs = []
    for k, v in d.items():
        b = np.ascontiguousarray(v, dtype='<f8').tobytes()
        hdr[k] = {'dtype': 'F64', 'shape': list(v.shape), 'data_offsets': [off, off + len(b)]}
        off += len(b); blobs.append(b)
    h = json.dumps(hdr).encode(); h += b' ' * ((8 - len(h) % 8) % 8)
    open(path, 'wb').write(struct.pack('<Q', len(h)) + h + b''.join(blobs))
def read_st(path):
    raw = open(path, 'rb').read(); n = struct.unpack('<Q', raw[:8])[0]
    hdr = json.loads(raw[8:8 + n]); out = {}
    for k, m in hdr.items():
        if k == '__metadata__': continue
        s, e = m['data_offsets']; dt = {'F64': '<f8', 'F32': '<f4'}[m['dtype']]
        out[k] = np.frombuffer(raw[8 + n + s:8 + n + e], dtype=dt).reshape(m['shape']).astype(np.float64)
    return out
rng = np.random.default_rng(1234)
def run(name, params, inputs, fn):
    subprocess.run(['bin/dpc', '--target', 'cpu', '--precision', 'f64', f'tests/ops/{name}.dp', '-o', f'{D}/{name}'], check=True)
    write_st(f'{D}/{name}_p.safetensors', params)
    args = [f'{D}/{name}', '--steps', '1', '--lr', '0', '--quiet', '--init', f'{D}/{name}_p.safetensors',
            '--summary-json', f'{D}/{name}_s.json', '--dump-grads', f'{D}/{name}_g.safetensors']
    for k, v in inputs.items():
        np.save(f'{D}/{name}_{k}.npy', v); args += ['--input', f'{k}={D}/{name}_{k}.npy']
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode: print(name, 'RUN FAIL', r.stdout, r.stderr); return
    dl = json.load(open(f'{D}/{name}_s.json'))['loss_first']
    P = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
    I = {k: torch.tensor(v).long() if v.dtype == np.int32 else torch.tensor(v) for k, v in inputs.items()}
    L = fn(P, I); L.backward()
    g = read_st(f'{D}/{name}_g.safetensors')
    gd = {k: float(np.abs(g[k] - P[k].grad.numpy()).max()) for k in P}
    print(f'{name:11s} dpc {dl:.15g}  torch {L.item():.15g}  |diff| {abs(dl - L.item()):.2e}  grad maxdiff {max(gd.values()):.2e} {gd}')
n = lambda *s, sd=1.0: rng.normal(0, sd, s)

def conv2d(P, I):
    x = I['x']
    h = torch.tanh(F.conv2d(x, P['w1'], padding=1) + P['b1'])
    g = F.conv2d(h, P['w2'], stride=2, padding=1, dilation=2)
    p = F.conv2d(x, P['w3'], stride=2)
    return (g * g).sum() + (p * torch.tanh(p)).sum()
run('conv2d', dict(w1=n(4,3,3,3,sd=.3), b1=n(4,1,1,sd=.1), w2=n(4,4,2,2,sd=.3), w3=n(2,3,1,1,sd=.5)), dict(x=n(2,3,7,6)), conv2d)

def pool(P, I):
    h = I['x'] * P['w']
    m = F.max_pool2d(h, 2); a = F.avg_pool2d(h, 3, stride=1)
    return (m * P['v']).sum() + (a * a).sum() + (h.mean((2, 3)) * 2).sum()
run('pool', dict(w=n(2,3,6,5), v=n(2,3,3,2)), dict(x=n(2,3,6,5)), pool)

def gn(P, I):
    return (F.group_norm(I['x'] * P['w'], 2, P['g'], P['b'], eps=1e-5) * P['w']).sum()
run('groupnorm', dict(g=n(4), b=n(4), w=n(2,4,3,2)), dict(x=n(2,4,3,2)), gn)

def up(P, I):
    h = I['x'] * P['w']
    u = F.interpolate(h, scale_factor=2, mode='bilinear', align_corners=False)
    return (u * u).sum() + (F.interpolate(h, scale_factor=3, mode='bilinear', align_corners=False) * P['v']).sum()
run('upsample', dict(w=n(2,2,3,4), v=n(2,2,9,12)), dict(x=n(2,2,3,4)), up)

def seg(P, I):
    z = F.conv2d(I['x'], P['w'])
    return F.cross_entropy(z, I['y'], ignore_index=0) + F.cross_entropy(torch.tanh(z), I['y'])
run('seg_xent', dict(w=n(3,2,1,1)), dict(x=n(2,2,4,3), y=rng.integers(0, 3, (2,4,3)).astype(np.int32)), seg)

def sl(P, I):
    x = I['x']; h = torch.tanh(x * P['w'])
    a = h[:, 1:4]; b = h[1:, :, 0:2]
    c = torch.cat([a, P['v'], h[:, 0:1]], 1)
    d = F.pad(b, (1, 3))
    e = F.pad(h[-1, 2:], (0, 0, 1, 0))
    return (c * c * x[:, 0:1]).sum() + (d * d * d).sum() + (e * e * e).sum() + (h[0, 2] * 3).sum()
run('slice', dict(w=n(3,5,4), v=n(3,2,4)), dict(x=n(3,5,4)), sl)

def nt(P, I):
    t = I['text']; x = t[:, :6]; y = t[:, 1:]
    lg = F.embedding(x, P['E']) @ P['W']
    return F.cross_entropy(lg.reshape(-1, 5), y.reshape(-1))
run('next_token', dict(E=n(5,3), W=n(3,5)), dict(text=rng.integers(0, 5, (2,7)).astype(np.int32)), nt)
