#!/usr/bin/env python3
"""graphs.py NET [B] [S] > NET.dp: the networks of Feng & Huang's table
(CVPR 2021) written in dpc's language, straight-line (every layer its own
weights, as the graphs they search): resnet152, densenet121, densenet201,
inception_v3 (at 299x299); darts and nasnet, the CIFAR-10 networks of 20
cells of 36 channels with DARTS-V2's and NASNet-A's cells that Feng & Huang
measure (at 32x32); darts_imagenet (DARTS-V2's ImageNet network, 14 cells of
48 channels); resnet50 and resnet101, and resnet152 and densenet121 at twice
and four times their depth (resnet152x2, ...x4), for bench/graphs.sh scale.
Batch norm is groupnorm with 32 groups (no batch statistics); the head is
global average pooling and a linear layer to 1000 classes."""
import math
import sys

G = 32


class Net:
    def __init__(self):
        self.params, self.body, self.n = [], [], 0

    def name(self, p):
        self.n += 1
        return f"{p}{self.n}"

    def conv(self, x, cin, cout, k, stride=1, pad=0, kw=None, groups=1, dilation=1):
        """a k x kw conv; pad as PyTorch's, both sides of both axes (kw: an asymmetric kernel, padded to keep the size)"""
        w = self.name("w")
        kw = kw or k
        if kw != k:
            # 1x7 and 7x1: zeros on the long axis only, so the size stays
            x = self.let(f"pad({x}, {2 if k > kw else 3}, {max(k, kw) // 2}, {max(k, kw) // 2})")
        fan = cin // groups * k * kw
        self.params.append(f"param {w} : f32[{cout}, {cin // groups}, {k}, {kw}] = normal({(2.0 / fan) ** 0.5:.4f})")
        y = self.name("c")
        extra = (f", stride={stride}" if stride != 1 else "") + (f", pad={pad}" if pad else "") + \
            (f", dilation={dilation}" if dilation != 1 else "") + (f", groups={groups}" if groups != 1 else "")
        self.body.append(f"let {y} = conv2d({x}, {w}{extra})")
        return y

    def norm(self, x, c, relu=True):
        g, b, y = self.name("g"), self.name("b"), self.name("n")
        self.params.append(f"param {g} : f32[{c}] = ones")
        self.params.append(f"param {b} : f32[{c}] = zeros")
        e = f"groupnorm({x}, {g}, {b}, groups={math.gcd(G, c)})"
        self.body.append(f"let {y} = {'relu(' + e + ')' if relu else e}")
        return y

    def let(self, e):
        y = self.name("v")
        self.body.append(f"let {y} = {e}")
        return y

    def stem(self):
        h = self.norm(self.conv("x", 3, 64, 7, 2, 3), 64)
        return self.let(f"max_pool2d({h}, 3, stride=2, pad=1)")

    def head(self, x, c, classes=1000):
        self.classes = classes
        self.params.append(f"param fc : f32[{c}, {classes}] = normal(0.01)")
        self.body.append(f"return cross_entropy(mean({x}, [2, 3]) @ fc, y)")

    def text(self, b, s, title):
        return "\n".join([f"# {title}: batch {b}, {s}x{s} (bench/graphs.py)", f"const B = {b}, S = {s}", ""] + self.params +
                         ["", "input x : f32[B, 3, S, S]", f"input y : i32[B]  # classes {self.classes}", "", "loss {"] +
                         ["  " + l for l in self.body] + ["}", ""])


def resnet(blocks):
    n = Net()
    h, c = n.stem(), 64
    for stage, (count, width) in enumerate(zip(blocks, (64, 128, 256, 512))):
        for i in range(count):
            stride = 2 if stage > 0 and i == 0 else 1
            a = n.norm(n.conv(h, c, width, 1), width)
            a = n.norm(n.conv(a, width, width, 3, stride, 1), width)
            a = n.norm(n.conv(a, width, 4 * width, 1), 4 * width, relu=False)
            sc = n.norm(n.conv(h, c, 4 * width, 1, stride), 4 * width, relu=False) if i == 0 else h
            h, c = n.let(f"relu({a} + {sc})"), 4 * width
    n.head(h, c)
    return n


def densenet(blocks, k=32):
    n = Net()
    h, c = n.stem(), 64
    for bi, count in enumerate(blocks):
        for _ in range(count):
            a = n.conv(n.norm(h, c), c, 4 * k, 1)
            f = n.conv(n.norm(a, 4 * k), 4 * k, k, 3, 1, 1)
            h, c = n.let(f"concat([{h}, {f}], 1)"), c + k
        if bi < len(blocks) - 1:
            t = n.conv(n.norm(h, c), c, c // 2, 1)
            h, c = n.let(f"avg_pool2d({t}, 2)"), c // 2
    n.head(n.norm(h, c), c)
    return n


def inception_v3():
    """torchvision's Inception-v3 (no auxiliary head) at 299x299: each
    BasicConv2d a conv, groupnorm and relu; the pool branches' 3x3 average
    pools zero-padded (count_include_pad, PyTorch's default)"""
    n = Net()

    def bc(x, cin, cout, k, stride=1, pad=0, kw=None):
        return n.norm(n.conv(x, cin, cout, k, stride, pad, kw), cout)

    def avg3(x):
        return n.let(f"avg_pool2d({x}, 3, stride=1, pad=1)")

    def cat(parts):
        return n.let("concat([" + ", ".join(parts) + "], 1)")

    def a(x, c, pf):
        b1 = bc(x, c, 64, 1)
        b5 = bc(bc(x, c, 48, 1), 48, 64, 5, 1, 2)
        b3 = bc(bc(bc(x, c, 64, 1), 64, 96, 3, 1, 1), 96, 96, 3, 1, 1)
        return cat([b1, b5, b3, bc(avg3(x), c, pf, 1)]), 224 + pf

    def b(x, c):
        b3 = bc(x, c, 384, 3, 2)
        bd = bc(bc(bc(x, c, 64, 1), 64, 96, 3, 1, 1), 96, 96, 3, 2)
        return cat([b3, bd, n.let(f"max_pool2d({x}, 3, stride=2)")]), 480 + c

    def c_(x, c, c7):
        b1 = bc(x, c, 192, 1)
        b7 = bc(bc(bc(x, c, c7, 1), c7, c7, 1, kw=7), c7, 192, 7, kw=1)
        bd = bc(x, c, c7, 1)
        for cin, cout, k, kw in ((c7, c7, 7, 1), (c7, c7, 1, 7), (c7, c7, 7, 1), (c7, 192, 1, 7)):
            bd = bc(bd, cin, cout, k, kw=kw)
        return cat([b1, b7, bd, bc(avg3(x), c, 192, 1)]), 768

    def d(x, c):
        b3 = bc(bc(x, c, 192, 1), 192, 320, 3, 2)
        b7 = bc(bc(bc(bc(x, c, 192, 1), 192, 192, 1, kw=7), 192, 192, 7, kw=1), 192, 192, 3, 2)
        return cat([b3, b7, n.let(f"max_pool2d({x}, 3, stride=2)")]), 512 + c

    def e(x, c):
        b1 = bc(x, c, 320, 1)
        t = bc(x, c, 384, 1)
        b3 = cat([bc(t, 384, 384, 1, kw=3), bc(t, 384, 384, 3, kw=1)])
        u = bc(bc(x, c, 448, 1), 448, 384, 3, 1, 1)
        bd = cat([bc(u, 384, 384, 1, kw=3), bc(u, 384, 384, 3, kw=1)])
        return cat([b1, b3, bd, bc(avg3(x), c, 192, 1)]), 2048

    h = bc(bc(bc("x", 3, 32, 3, 2), 32, 32, 3), 32, 64, 3, 1, 1)
    h = n.let(f"max_pool2d({h}, 3, stride=2)")
    h = bc(bc(h, 64, 80, 1), 80, 192, 3)
    h, c = n.let(f"max_pool2d({h}, 3, stride=2)"), 192
    for pf in (32, 64, 64):
        h, c = a(h, c, pf)
    h, c = b(h, c)
    for c7 in (128, 160, 160, 192):
        h, c = c_(h, c, c7)
    h, c = d(h, c)
    for _ in range(2):
        h, c = e(h, c)
    n.head(h, c)
    return n


# genotypes as DARTS's code writes them: per node two (op, input) pairs, input 0 the cell before the
# previous one, 1 the previous cell, 2 onwards the cell's own nodes; and which states the output concatenates
DARTS_V2 = ([("sep_conv_3x3", 0), ("sep_conv_3x3", 1), ("sep_conv_3x3", 0), ("sep_conv_3x3", 1),
             ("sep_conv_3x3", 1), ("skip_connect", 0), ("skip_connect", 0), ("dil_conv_3x3", 2)], (2, 3, 4, 5),
            [("max_pool_3x3", 0), ("max_pool_3x3", 1), ("skip_connect", 2), ("max_pool_3x3", 1),
             ("max_pool_3x3", 0), ("skip_connect", 2), ("skip_connect", 2), ("max_pool_3x3", 1)], (2, 3, 4, 5))
# NASNet-A's cells (Zoph et al., CVPR 2018) as DARTS's code and Feng & Huang's write them: the normal cell
# concatenates its five nodes, the reduction cell its last three
NASNET = ([("sep_conv_5x5", 1), ("sep_conv_3x3", 0), ("sep_conv_5x5", 0), ("sep_conv_3x3", 0),
           ("avg_pool_3x3", 1), ("skip_connect", 0), ("avg_pool_3x3", 0), ("avg_pool_3x3", 0),
           ("sep_conv_3x3", 1), ("skip_connect", 1)], (2, 3, 4, 5, 6),
          [("sep_conv_5x5", 1), ("sep_conv_7x7", 0), ("max_pool_3x3", 1), ("sep_conv_7x7", 0),
           ("avg_pool_3x3", 1), ("sep_conv_5x5", 0), ("skip_connect", 3), ("avg_pool_3x3", 2),
           ("sep_conv_3x3", 2), ("max_pool_3x3", 1)], (4, 5, 6))


def cells(side, genotype, C, layers, imagenet, classes):
    """A cell network as DARTS's code builds it (Liu et al., ICLR 2019):
    NetworkImageNet (two strided stems, side / 8 after them) or
    NetworkCIFAR (one 3x3 stem of 3C channels at full size); `layers`
    cells, reductions at a third and two thirds (channels doubling), each
    node the sum of two ops on earlier states, a cell's output some of its
    states concatenated; no auxiliary head. Separable convolutions are a
    depthwise and a pointwise convolution, twice; each BatchNorm a
    groupnorm; average pools count their padding as zeros (DARTS's
    exclude it: the same shapes and nearly the same FLOPs)"""
    normal, normal_cat, reduce, reduce_cat = genotype
    n = Net()

    def relu(x):
        return n.let(f"relu({x})")

    def rcb(x, cin, cout):
        return n.norm(n.conv(relu(x), cin, cout, 1), cout, relu=False)

    def fact_reduce(x, cin, cout, size):
        r = relu(x)
        a = n.conv(r, cin, cout // 2, 1, 2)
        b = n.conv(n.let(f"{r}[:, :, 1:{size}, 1:{size}]"), cin, cout // 2, 1, 2)
        return n.norm(n.let(f"concat([{a}, {b}], 1)"), cout, relu=False)

    def sep(x, c, k, stride):
        for s in (stride, 1):
            x = n.conv(n.conv(relu(x), c, c, k, s, k // 2, groups=c), c, c, 1)
            x = n.norm(x, c, relu=False)
        return x

    def dil(x, c, stride):
        return n.norm(n.conv(n.conv(relu(x), c, c, 3, stride, 2, groups=c, dilation=2), c, c, 1), c, relu=False)

    def op(name, x, c, stride, size):
        if name.startswith("sep_conv_"):
            return sep(x, c, int(name[-1]), stride)
        if name == "dil_conv_3x3":
            return dil(x, c, stride)
        if name == "max_pool_3x3":
            return n.let(f"max_pool2d({x}, 3, stride={stride}, pad=1)")
        if name == "avg_pool_3x3":
            return n.let(f"avg_pool2d({x}, 3, stride={stride}, pad=1)")
        return x if stride == 1 else fact_reduce(x, c, c, size)

    if imagenet:
        s0 = n.norm(n.conv("x", 3, C // 2, 3, 2, 1), C // 2)
        s0 = n.norm(n.conv(s0, C // 2, C, 3, 2, 1), C, relu=False)
        s1 = n.norm(n.conv(relu(s0), C, C, 3, 2, 1), C, relu=False)
        # the stems leave side / 4 and side / 8
        size0, size1, cpp, cp, red_prev = side // 4, side // 8, C, C, True
    else:
        s0 = s1 = n.norm(n.conv("x", 3, 3 * C, 3, 1, 1), 3 * C, relu=False)
        size0 = size1 = side
        cpp, cp, red_prev = 3 * C, 3 * C, False
    cur = C
    for i in range(layers):
        red = i in (layers // 3, 2 * layers // 3)
        if red:
            cur *= 2
        ops, cat = (reduce, reduce_cat) if red else (normal, normal_cat)
        p0 = fact_reduce(s0, cpp, cur, size0) if red_prev else rcb(s0, cpp, cur)
        p1 = rcb(s1, cp, cur)
        states, size = [p0, p1], size1
        for j in range(len(ops) // 2):
            parts = []
            for name, k in ops[2 * j:2 * j + 2]:
                stride = 2 if red and k < 2 else 1
                parts.append(op(name, states[k], cur, stride, size))
            states.append(n.let(f"{parts[0]} + {parts[1]}"))
        out = n.let("concat([" + ", ".join(states[k] for k in cat) + "], 1)")
        s0, s1, size0, size1 = s1, out, size1, size1 // 2 if red else size1
        cpp, cp, red_prev = cp, len(cat) * cur, red
    n.head(relu(s1) if imagenet else s1, cp, classes)
    return n


NETS = {
    "resnet50": (lambda s: resnet((3, 4, 6, 3)), "ResNet-50"),
    "resnet101": (lambda s: resnet((3, 4, 23, 3)), "ResNet-101"),
    "resnet152": (lambda s: resnet((3, 8, 36, 3)), "ResNet-152"),
    "densenet121": (lambda s: densenet((6, 12, 24, 16)), "DenseNet-121"),
    "densenet201": (lambda s: densenet((6, 12, 48, 32)), "DenseNet-201"),
    "inception_v3": (lambda s: inception_v3(), "Inception-v3"),
    "darts": (lambda s: cells(s, DARTS_V2, 36, 20, False, 10), "DARTS-V2 (CIFAR-10)"),
    "nasnet": (lambda s: cells(s, NASNET, 36, 20, False, 10), "NASNet-A (CIFAR-10)"),
    "darts_imagenet": (lambda s: cells(s, DARTS_V2, 48, 14, True, 1000), "DARTS-V2 (ImageNet)"),
    # twice and four times the depth, for the planner's time against the graph's size (bench/graphs.sh scale)
    "resnet152x2": (lambda s: resnet((6, 16, 72, 6)), "ResNet-152, twice as deep"),
    "resnet152x4": (lambda s: resnet((12, 32, 144, 12)), "ResNet-152, four times as deep"),
    "densenet121x2": (lambda s: densenet((12, 24, 48, 32)), "DenseNet-121, twice as deep"),
    "densenet121x4": (lambda s: densenet((24, 48, 96, 64)), "DenseNet-121, four times as deep"),
}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in NETS:
        sys.exit("usage: graphs.py " + "|".join(NETS) + " [B] [S]")
    b = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    s = int(sys.argv[3]) if len(sys.argv) > 3 else 224
    make, title = NETS[sys.argv[1]]
    sys.stdout.write(make(s).text(b, s, title))
