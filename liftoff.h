// Liftoff's public API in one include, for programs that embed the library (find_package(Liftoff) or
// add_subdirectory; see docs/api.md for which header holds what). Writing an op of your own also needs
// runtime/dispatch.h (included here) and, for CUDA kernels, runtime/cuda/context.h and runtime/cuda/check.h
// (left out here: they pull in the CUDA, cuBLAS and cuDNN headers).
#pragma once

// Core: tensors, autograd, devices, randomness, CPU threads.
#include "runtime/async_scalar.h"
#include "runtime/autograd.h"
#include "runtime/branches.h"
#include "runtime/config.h"
#include "runtime/determinism.h"
#include "runtime/device.h"
#include "runtime/device_select.h"
#include "runtime/dispatch.h"
#include "runtime/dtype.h"
#include "runtime/error.h"
#include "runtime/gradcheck.h"
#include "runtime/parallel.h"
#include "runtime/random.h"
#include "runtime/storage.h"
#include "runtime/stream.h"
#include "runtime/system_info.h"
#include "runtime/tensor.h"

// Differentiable ops (free functions: conv2d, linear, relu, cross_entropy, ...).
#include "ops/ops.h"

// Data: data sets, batching, augmentation, the prefetching DataLoader.
#include "data/augment.h"
#include "data/batch_iterator.h"
#include "data/cifar.h"
#include "data/dataset.h"
#include "data/idx.h"
#include "data/image_folder.h"
#include "data/loader.h"

// Models and training: modules, layers, the model zoo, optimizers, schedules, mixed precision, checkpoints,
// the Trainer, data parallelism, and the utilization report.
#include "models/train/amp.h"
#include "runtime/autocast.h"
#include "models/train/checkpoint.h"
#include "models/train/ddp.h"
#include "models/nn/layers.h"
#include "models/nn/module.h"
#include "models/train/optim.h"
#include "models/report/report.h"
#include "models/train/safetensors.h"
#include "models/train/schedule.h"
#include "models/train/trainer.h"
#include "models/train/weights.h"
#include "models/nn/zoo.h"
#include "runtime/distributed/env.h"
#include "runtime/distributed/process_group.h"
#include "runtime/profile/profiler.h"
