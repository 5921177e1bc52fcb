#!/usr/bin/python3
"""The PyTorch peer of `purine train`: the same networks, data, batch, optimizer and thread
count, timed the same way (images/s after the first 10 iterations). Prints one JSON line.
Run with Debian's python3-torch: /usr/bin/python3 tools/bench/pytorch_peer.py --model mlp"""
import argparse
import gzip
import json
import os
import struct
import time

import numpy as np
import torch
import torch.nn as nn

from pytorch_gpu_peer import googlenet, resnet


def load_images(path):
    with gzip.open(path, "rb") as f:
        magic, count, rows, cols = struct.unpack(">IIII", f.read(16))
        assert magic == 0x803, f"{path}: not an IDX image file"
        data = np.frombuffer(f.read(), dtype=np.uint8)
    return data.reshape(count, 1, rows, cols).astype(np.float32) / 255.0


def load_labels(path):
    with gzip.open(path, "rb") as f:
        magic, count = struct.unpack(">II", f.read(8))
        assert magic == 0x801, f"{path}: not an IDX label file"
        return np.frombuffer(f.read(), dtype=np.uint8).astype(np.int64)


def synthetic(spec, count, seed=1):
    """Random images and labels for `--data synthetic:CxHxW:CLASSES`, as purine train serves
    them for benchmarks (other values, the same shapes and cost)."""
    shape, classes = spec.split(":")[1:3]
    c, h, w = (int(v) for v in shape.split("x"))
    gen = torch.Generator().manual_seed(seed)
    images = torch.rand((count, c, h, w), generator=gen)
    labels = torch.randint(0, int(classes), (count,), generator=gen)
    return images, labels


def build(name, in_channels=1, classes=10):
    # At 28x28 GoogLeNet's inceptions run on 4x4, 2x2 and 1x1 maps, as purine builds it.
    if name == "googlenet":
        return googlenet(classes, in_channels=in_channels)
    if name in ("resnet18", "resnet20", "resnet50"):
        return resnet(name, classes, in_channels=in_channels)
    if (in_channels, classes) != (1, 10):
        raise SystemExit(f"error: model '{name}' is built for 1x28x28 images of 10 classes")
    if name == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128),
                             nn.ReLU(), nn.Linear(128, 10))
    if name == "convnet":
        return nn.Sequential(nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Flatten(), nn.Linear(7 * 7 * 64, 1024), nn.ReLU(),
                             nn.Linear(1024, 10))
    if name == "convnet_bn":  # purine's default model: batch norm between each conv (no bias)
        return nn.Sequential(nn.Conv2d(1, 32, 5, padding=2, bias=False), nn.BatchNorm2d(32),
                             nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(32, 64, 5, padding=2, bias=False),
                             nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                             nn.Linear(7 * 7 * 64, 1024), nn.ReLU(), nn.Linear(1024, 10))
    if name == "lenet":
        return nn.Sequential(nn.Conv2d(1, 20, 5), nn.MaxPool2d(2), nn.Conv2d(20, 50, 5),
                             nn.MaxPool2d(2), nn.Flatten(), nn.Linear(800, 500), nn.ReLU(),
                             nn.Linear(500, 10))
    raise SystemExit(f"error: unknown model '{name}'")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="convnet")
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist",
                   help="IDX directory, or synthetic:CxHxW:CLASSES (random images)")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--iters", type=int, default=300)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--optimizer", default="sgd", choices=["sgd", "adam"])
    args = p.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    if args.data.startswith("synthetic:"):
        images, labels = synthetic(args.data, 4 * args.batch)
        net = build(args.model, images.shape[1], int(args.data.split(":")[2]))
    else:
        images = torch.from_numpy(load_images(os.path.join(args.data, "train-images-idx3-ubyte.gz")))
        labels = torch.from_numpy(load_labels(os.path.join(args.data, "train-labels-idx1-ubyte.gz")))
        net = build(args.model)
    if args.optimizer == "adam":  # purine train --optimizer=adam: L2 decay through the gradient
        opt = torch.optim.Adam(net.parameters(), lr=args.lr, weight_decay=5e-4)
    else:
        opt = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4)
    loss_fn = nn.CrossEntropyLoss()
    order = torch.randperm(images.shape[0])
    batches = images.shape[0] // args.batch
    warmup = min(10, args.iters // 2)
    start = None
    loss = None
    for it in range(args.iters):
        if it == warmup:
            start = time.perf_counter()
        idx = order[(it % batches) * args.batch:(it % batches + 1) * args.batch]
        x, y = images[idx], labels[idx]
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()
    elapsed = time.perf_counter() - start
    print(json.dumps({"framework": "pytorch", "version": torch.__version__, "model": args.model,
                      "optimizer": args.optimizer, "batch": args.batch, "threads": args.threads,
                      "images_per_sec": (args.iters - warmup) * args.batch / elapsed,
                      "final_loss": float(loss)}))


if __name__ == "__main__":
    main()
