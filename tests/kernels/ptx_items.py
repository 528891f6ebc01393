"""ptx_items.py PLAN.json MODULE.ptx: every kernel the cost model counts
instructions for (instructions_per_item) has as many in the PTX, counted
here on their own: the body of the kernel's grid-stride loop (from the
label the one backward branch goes to, to that branch) plus the bodies of
the functions called there; and GPT-2's GELU kernels (fused[..., 3072])
are priced by them: one work item's instructions over 32 lanes at 0.76 of
4 warp instructions a clock on each of the H200's 132 SMs, plus the 2 us
launch, and that is more than twice their bytes at the bandwidth."""
import json, re, sys

plan, ptx = json.load(open(sys.argv[1])), open(sys.argv[2]).read()
INSN = re.compile(r'^\s+(@!?%\w+\s+)?[a-z][\w.]*(\s.*)?;\s*$')


def body_count(lines):
    n = 0
    for i, l in enumerate(lines):
        if INSN.match(l) and not l.strip().startswith('.'):
            n += 1
        if 'call.uni' in l:
            callee = lines[i + 1].strip().rstrip(',')
            m = re.search(r' %s\(.*?\n\{\n(.*?)\n\}' % re.escape(callee), ptx, re.S)
            assert m, callee
            n += sum(1 for x in m.group(1).split('\n') if INSN.match(x) and not x.strip().startswith('.'))
    return n


def count(k):
    m = re.search(r'\.entry dp_k%d\(.*?\n\}' % k, ptx, re.S)
    lines = m.group(0).split('\n')
    labels = {l[:-1]: i for i, l in enumerate(lines) if re.match(r'^\$?\w+:$', l)}
    backs = [(labels[b.group(1)], i) for i, l in enumerate(lines)
             for b in [re.search(r'\bbra(?:\.uni)?\s+(\$?\w+);', l)] if b and b.group(1) in labels and labels[b.group(1)] < i]
    if len(backs) != 1:
        return 0
    lo, hi = backs[0]
    return body_count(lines[lo:hi + 1])


seen, gelu = 0, 0
for k in plan['kernels']:
    if 'instructions_per_item' not in k:
        continue
    mine = count(k['kernel'])
    assert mine == k['instructions_per_item'], (k['name'], k['kernel'], mine, k['instructions_per_item'])
    seen += 1
    if k['name'].startswith('fused[') and k['name'].endswith(',3072]'):
        clock = 66.9e12 / (256 * 132)
        issue = k['items'] * mine / 32 / (4 * 132 * clock * 0.76) * 1e6 + 2
        assert abs(k['predicted_us'] - issue) <= 0.01 * issue, (k['name'], k['predicted_us'], issue)
        assert issue > 2 * k['bytes'] / 4.8e12 * 1e6, (k['name'], issue, k['bytes'])
        gelu += 1
assert seen >= 10 and gelu == 2, (seen, gelu)
print(f'{seen} kernels counted as the PTX has them; the GELU kernels priced by their instructions')
