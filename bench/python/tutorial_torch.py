#!/usr/bin/env python3
"""The PyTorch transfer-learning tutorial's "ConvNet as fixed feature extractor", as the tutorial writes
it (torchvision ImageFolder + transforms, RandomResizedCrop/flip for train, Resize(256)/CenterCrop(224)
for val, frozen backbone + a new Linear, CrossEntropyLoss, SGD lr 0.001 momentum 0.9, StepLR(7, 0.1),
batch 4, the backbone run on every batch of every epoch, best val weights kept) on PyTorch 1.13 CPU.
The backbone is the ONNX file ftl uses (run as a torch module by the peer benchmarks' onnx_torch.py:
no ResNet-18 weights can be downloaded here), with its [-1, 1] input scaling.
Prints one JSON line: seconds and the best val accuracy.
usage: tutorial_torch.py DATA BACKBONE.onnx PEER_BENCH_DIR EPOCHS THREADS"""
import copy
import json
import os
import sys
import time

data, backbone, peer_dir, epochs, threads = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
os.environ["OMP_NUM_THREADS"] = str(threads)
import torch  # noqa: E402
from torch import nn  # noqa: E402
from torchvision import datasets, transforms  # noqa: E402

sys.path.insert(0, peer_dir)
from onnx_torch import OnnxModule  # noqa: E402

torch.set_num_threads(threads)
torch.manual_seed(0)
t0 = time.perf_counter()
scale = transforms.Normalize([0.5, 0.5, 0.5], [0.5, 0.5, 0.5])  # x/127.5 - 1, as the MobileNets take
data_transforms = {
    "train": transforms.Compose([transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(),
                                 transforms.ToTensor(), scale]),
    "val": transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224), transforms.ToTensor(), scale]),
}
image_datasets = {x: datasets.ImageFolder(os.path.join(data, x), data_transforms[x]) for x in ["train", "val"]}
loaders = {x: torch.utils.data.DataLoader(image_datasets[x], batch_size=4, shuffle=True, num_workers=threads)
           for x in ["train", "val"]}
sizes = {x: len(image_datasets[x]) for x in ["train", "val"]}
features = OnnxModule(backbone)
for p in features.parameters():
    p.requires_grad = False
model = nn.Sequential(features, nn.Flatten(), nn.Linear(1280, len(image_datasets["train"].classes)))
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model[2].parameters(), lr=0.001, momentum=0.9)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=7, gamma=0.1)
best_wts, best_acc = copy.deepcopy(model.state_dict()), 0.0
for epoch in range(epochs):
    for phase in ["train", "val"]:
        model.train() if phase == "train" else model.eval()
        correct = 0
        for inputs, labels in loaders[phase]:
            optimizer.zero_grad()
            with torch.set_grad_enabled(phase == "train"):
                outputs = model(inputs)
                loss = criterion(outputs, labels)
                if phase == "train":
                    loss.backward()
                    optimizer.step()
            correct += int((outputs.argmax(1) == labels).sum())
        if phase == "train":
            scheduler.step()
        acc = correct / sizes[phase]
        if phase == "val" and acc > best_acc:
            best_acc, best_wts = acc, copy.deepcopy(model.state_dict())
model.load_state_dict(best_wts)
t1 = time.perf_counter()
print(json.dumps({"total_s": t1 - t0, "val_acc": best_acc, "epochs": epochs, "threads": threads}))
