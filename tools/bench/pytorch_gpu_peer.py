#!/usr/bin/env python3
"""The PyTorch peer of `purine train --device=0` on one GPU: the same networks (mlp, convnet,
GoogLeNet as models/googlenet.cpp builds it: inception v1 with LRN, no batch norm, no
auxiliary heads; resnet18 and resnet50 as models/resnet.cpp builds them), synthetic data of
the same shape drawn once on the host and copied to the GPU every iteration (as purine's data
source is), SGD with momentum 0.9 and weight decay 5e-4, FP32 with TF32 off unless --tf32.
Three ways to run it (--mode): `eager` as it is; `benchmark` with
torch.backends.cudnn.benchmark = True (what a PyTorch user sets for fixed shapes); `graph`
with that, and forward, backward and update captured once in a CUDA graph and replayed after
each batch's copy (the strongest static-shape setting). Times images/s after the first 10
iterations, synchronizing the GPU at both ends. Prints one JSON line; with --kernels N, then
the GPU work of N more steps recorded by torch.profiler: kernels and copies per step, their
device time per step against the measured step, and the longest kernels (to set beside a Purine
trace's stream busy time and longest ops, tools/bench/trace_gaps.py).
Usage: python3 tools/bench/pytorch_gpu_peer.py --model googlenet --batch 128 --iters 60
[--mode eager|benchmark|graph] [--tf32] [--kernels N]"""
import argparse
import json
import time

import torch
import torch.nn as nn


def conv_relu(cin, cout, k, stride=1):
    return nn.Sequential(nn.Conv2d(cin, cout, k, stride, k // 2), nn.ReLU(inplace=True))


class Inception(nn.Module):
    def __init__(self, cin, a, br, b, cr, c, p):
        super().__init__()
        self.b1 = conv_relu(cin, a, 1)
        self.b2 = nn.Sequential(conv_relu(cin, br, 1), conv_relu(br, b, 3))
        self.b3 = nn.Sequential(conv_relu(cin, cr, 1), conv_relu(cr, c, 5))
        self.b4 = nn.Sequential(nn.MaxPool2d(3, 1, 1), conv_relu(cin, p, 1))
        self.out = a + b + c + p

    def forward(self, x):
        return torch.cat([self.b1(x), self.b2(x), self.b3(x), self.b4(x)], 1)


def googlenet(classes, in_channels=3):
    table = [(64, 96, 128, 16, 32, 32), (128, 128, 192, 32, 96, 64), "pool",
             (192, 96, 208, 16, 48, 64), (160, 112, 224, 24, 64, 64), (128, 128, 256, 24, 64, 64),
             (112, 144, 288, 32, 64, 64), (256, 160, 320, 32, 128, 128), "pool",
             (256, 160, 320, 32, 128, 128), (384, 192, 384, 48, 128, 128)]
    layers = [conv_relu(in_channels, 64, 7, 2), nn.MaxPool2d(3, 2, 1),
              nn.LocalResponseNorm(5, 1e-4, 0.75),
              conv_relu(64, 64, 1), conv_relu(64, 192, 3), nn.LocalResponseNorm(5, 1e-4, 0.75),
              nn.MaxPool2d(3, 2, 1)]
    channels = 192
    for entry in table:
        if entry == "pool":
            layers.append(nn.MaxPool2d(3, 2, 1))
            continue
        block = Inception(channels, *entry)
        channels = block.out
        layers.append(block)
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.4), nn.Linear(channels, classes)]
    return nn.Sequential(*layers)


def conv_bn(cin, cout, k, stride=1):
    return nn.Sequential(nn.Conv2d(cin, cout, k, stride, k // 2, bias=False), nn.BatchNorm2d(cout))


class Residual(nn.Module):
    """models/resnet.cpp's blocks: relu(branch(x) + x, or x's 1x1 projection where the maps or
    channels change); basic (two 3x3) or bottleneck (1x1, 3x3 with the stride, 1x1 up to 4x)."""

    def __init__(self, cin, width, stride, bottleneck):
        super().__init__()
        self.out = 4 * width if bottleneck else width
        if bottleneck:
            layers = [conv_bn(cin, width, 1), nn.ReLU(inplace=True),
                      conv_bn(width, width, 3, stride), nn.ReLU(inplace=True),
                      conv_bn(width, self.out, 1)]
        else:
            layers = [conv_bn(cin, width, 3, stride), nn.ReLU(inplace=True),
                      conv_bn(width, width, 3)]
        self.branch = nn.Sequential(*layers)
        project = stride != 1 or cin != self.out
        self.shortcut = conv_bn(cin, self.out, 1, stride) if project else nn.Identity()

    def forward(self, x):
        return torch.relu(self.branch(x) + self.shortcut(x))


def resnet(name, classes, in_channels=3):
    """resnet18 and resnet50 (ImageNet stem) or resnet20 (CIFAR), as models/resnet.cpp."""
    if name == "resnet20":
        layers = [conv_bn(in_channels, 16, 3), nn.ReLU(inplace=True)]
        stages, bottleneck, cin = [(3, 16, 1), (3, 32, 2), (3, 64, 2)], False, 16
    else:
        layers = [conv_bn(in_channels, 64, 7, 2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1)]
        bottleneck, cin = name == "resnet50", 64
        counts = [3, 4, 6, 3] if bottleneck else [2, 2, 2, 2]
        stages = list(zip(counts, [64, 128, 256, 512], [1, 2, 2, 2]))
    for blocks, width, stride in stages:
        for b in range(blocks):
            block = Residual(cin, width, stride if b == 0 else 1, bottleneck)
            layers.append(block)
            cin = block.out
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes)]
    return nn.Sequential(*layers)


def build(name):
    if name == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(inplace=True),
                             nn.Linear(256, 128), nn.ReLU(inplace=True),
                             nn.Linear(128, 10)), (1, 28, 28), 10
    if name == "convnet":
        return nn.Sequential(conv_relu(1, 32, 5), nn.MaxPool2d(2), conv_relu(32, 64, 5),
                             nn.MaxPool2d(2), nn.Flatten(), nn.Linear(7 * 7 * 64, 1024),
                             nn.ReLU(inplace=True), nn.Linear(1024, 10)), (1, 28, 28), 10
    if name == "googlenet":
        return googlenet(1000), (3, 224, 224), 1000
    if name in ("resnet18", "resnet50"):
        return resnet(name, 1000), (3, 224, 224), 1000
    raise SystemExit(f"error: unknown model '{name}' (mlp, convnet, googlenet, resnet18, "
                     "resnet50)")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="googlenet")
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--iters", type=int, default=60)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--mode", choices=["eager", "benchmark", "graph"], default="eager")
    p.add_argument("--tf32", action="store_true")
    p.add_argument("--kernels", type=int, default=0, metavar="N",
                   help="then profile N more steps and print their GPU work per step")
    args = p.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("error: PyTorch sees no GPU")
    torch.backends.cuda.matmul.allow_tf32 = args.tf32
    torch.backends.cudnn.allow_tf32 = args.tf32
    torch.backends.cudnn.benchmark = args.mode != "eager"
    torch.manual_seed(1)
    net, shape, classes = build(args.model)
    net = net.cuda()
    opt = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4)
    loss_fn = nn.CrossEntropyLoss()
    pool = 4  # distinct host batches, as purine's synthetic source keeps
    images = [torch.rand(args.batch, *shape).mul_(2).sub_(1).pin_memory() for _ in range(pool)]
    labels = [torch.randint(0, classes, (args.batch,)).pin_memory() for _ in range(pool)]
    x = torch.empty(args.batch, *shape, device="cuda")
    y = torch.empty(args.batch, dtype=torch.long, device="cuda")

    def step(it):
        x.copy_(images[it % pool], non_blocking=True)
        y.copy_(labels[it % pool], non_blocking=True)
        opt.zero_grad(set_to_none=args.mode != "graph")
        loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()
        return loss

    warmup = min(10, args.iters // 2)
    graph = None
    if args.mode == "graph":
        # Warm up on a side stream (cuDNN's autotuning, the optimizer's buffers), then capture
        # forward, backward and update on the static batch tensors; each iteration copies its
        # batch into them on the stream, ahead of the replay.
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for it in range(3):
                step(it)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            loss = loss_fn(net(x), y)
            loss.backward()
            opt.step()

    def iteration(it):
        if graph is None:
            return step(it)
        x.copy_(images[it % pool], non_blocking=True)
        y.copy_(labels[it % pool], non_blocking=True)
        graph.replay()
        return loss

    start = None
    for it in range(args.iters):
        if it == warmup:
            torch.cuda.synchronize()
            start = time.perf_counter()
        loss = iteration(it)
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    images_per_sec = (args.iters - warmup) * args.batch / elapsed
    print(json.dumps({"framework": "pytorch", "version": torch.__version__, "model": args.model,
                      "batch": args.batch, "mode": args.mode, "tf32": args.tf32,
                      "device": torch.cuda.get_device_name(0),
                      "images_per_sec": images_per_sec, "final_loss": float(loss)}), flush=True)
    if args.kernels > 0:
        print_kernels(lambda it: iteration(args.iters + it), args.kernels,
                      1e3 * args.batch / images_per_sec)


def print_kernels(iteration, steps, step_ms):
    """The GPU work of `steps` calls of iteration(i), recorded by torch.profiler: per step, the
    kernels and copies and their summed device time, then the longest kernels."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for it in range(steps):
            iteration(it)
        torch.cuda.synchronize()
    rows = []
    for e in prof.key_averages():
        # A row's own device time (not its children's, so nothing counts twice):
        # self_device_time_total from PyTorch 2.4 on, self_cuda_time_total before (microseconds)
        us = getattr(e, "self_device_time_total", None)
        us = e.self_cuda_time_total if us is None else us
        if us > 0:
            rows.append((us / steps / 1e3, e.count / steps, e.key))
    rows.sort(reverse=True)
    total = sum(r[0] for r in rows)
    count = sum(r[1] for r in rows)
    if not rows:
        print("torch.profiler recorded no GPU work (a CUDA graph's kernels need CUPTI's graph "
              "tracing); try --mode benchmark")
        return
    print(f"GPU work per step: {count:.0f} kernels and copies, {total:.3f} ms of device time, "
          f"{100 * total / step_ms:.1f}% of the measured {step_ms:.3f} ms step")
    for ms, calls, name in rows[:8]:
        print(f"  {ms:8.3f} ms  {calls:4.0f}x  {name[:100]}")


if __name__ == "__main__":
    main()
