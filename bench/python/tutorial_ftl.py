#!/usr/bin/env python3
"""The PyTorch transfer-learning tutorial's ants-and-bees job ("ConvNet as fixed feature extractor")
done with `import ftl`, as a notebook would: prep the photos, train the head on the frozen backbone's
cached features (the tutorial's optimizer: SGD lr 0.001 momentum 0.9, batch 4; flip augmentation), and
evaluate. Prints one JSON line: the seconds of each step and the val accuracy.
usage: tutorial_ftl.py DATA BACKBONE.onnx WORKDIR EPOCHS"""
import json
import os
import shutil
import sys
import time

import ftl

data, backbone, work, epochs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
shutil.rmtree(work, ignore_errors=True)
t0 = time.perf_counter()
ftl.prep(data, os.path.join(work, "ds"), size=224, verbose=0)
t1 = time.perf_counter()
h = ftl.train(os.path.join(work, "ds", "train.parquet"), val=os.path.join(work, "ds", "val.parquet"), backbone=backbone,
              out=os.path.join(work, "model.ftl"), epochs=epochs, batch=4, optimizer="sgd", lr=0.001, momentum=0.9,
              augment="flip", verbose=0)
t2 = time.perf_counter()
metrics = h.model.evaluate(os.path.join(work, "ds", "val.parquet"), verbose=0)
t3 = time.perf_counter()
print(json.dumps({"prep_s": t1 - t0, "train_s": t2 - t1, "eval_s": t3 - t2, "total_s": t3 - t0,
                  "val_acc": metrics["top1"], "best_epoch": h.best_epoch}))
