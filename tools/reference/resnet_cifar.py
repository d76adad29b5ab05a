"""He et al. 2016's CIFAR-style ResNet (projection shortcuts: 1x1 conv stride 2 + BN) with the module names that
Liftoff's models/nn/zoo.h uses, so state dicts map one to one. Used only by the reference scripts."""
import torch.nn as nn
import torch.nn.functional as F


class BasicBlock(nn.Module):
    def __init__(self, in_planes, planes, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = nn.Sequential()
        if stride != 1 or in_planes != planes:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_planes, planes, 1, stride=stride, bias=False), nn.BatchNorm2d(planes))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ResNet(nn.Module):
    def __init__(self, n, in_channels, classes):
        super().__init__()
        self.in_planes = 16
        self.conv1 = nn.Conv2d(in_channels, 16, 3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.layer1 = self._stage(16, n, 1)
        self.layer2 = self._stage(32, n, 2)
        self.layer3 = self._stage(64, n, 2)
        self.fc = nn.Linear(64, classes)

    def _stage(self, planes, n, stride):
        blocks = []
        for i in range(n):
            blocks.append(BasicBlock(self.in_planes, planes, stride if i == 0 else 1))
            self.in_planes = planes
        return nn.Sequential(*blocks)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.layer3(self.layer2(self.layer1(out)))
        out = F.adaptive_avg_pool2d(out, 1).flatten(1)
        return self.fc(out)


def resnet(depth, in_channels=1, classes=10):
    assert (depth - 2) % 6 == 0, "depth must be 6n+2"
    return ResNet((depth - 2) // 6, in_channels, classes)


def conv_bn(c_in, c_out):
    return nn.Sequential(nn.Conv2d(c_in, c_out, 3, padding=1, bias=False), nn.BatchNorm2d(c_out))


class ResNet9(nn.Module):
    """David Page's DAWNBench ResNet-9, as Liftoff's zoo builds it (models/nn/zoo.h: the same module names)."""

    def __init__(self, in_channels=1, classes=10):
        super().__init__()
        self.prep = conv_bn(in_channels, 64)
        self.layer1, self.res1a, self.res1b = conv_bn(64, 128), conv_bn(128, 128), conv_bn(128, 128)
        self.layer2 = conv_bn(128, 256)
        self.layer3, self.res3a, self.res3b = conv_bn(256, 512), conv_bn(512, 512), conv_bn(512, 512)
        self.fc = nn.Linear(512, classes, bias=False)

    def forward(self, x):
        x = F.relu(self.prep(x))
        x = F.max_pool2d(F.relu(self.layer1(x)), 2)
        x = x + F.relu(self.res1b(F.relu(self.res1a(x))))
        x = F.max_pool2d(F.relu(self.layer2(x)), 2)
        x = F.max_pool2d(F.relu(self.layer3(x)), 2)
        x = x + F.relu(self.res3b(F.relu(self.res3a(x))))
        x = F.adaptive_max_pool2d(x, 1).flatten(1)
        return self.fc(x) * 0.125
