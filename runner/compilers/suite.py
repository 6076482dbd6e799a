"""The built-in suite: small models of common shapes, each a factory
`(batch_size) -> (model, example_inputs)`.

Inputs come from torch's default generator, which the harness seeds before calling a factory,
so weights and inputs are the same in every process. Dropout is 0 everywhere: compiled
backends draw random numbers differently from eager, which would fail verification in train.
"""

from __future__ import annotations

import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self, features: int = 256, hidden: int = 512, classes: int = 10):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.GELU(),
            nn.LayerNorm(hidden), nn.Linear(hidden, classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


class CNN(nn.Module):
    def __init__(self, classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        )
        self.head = nn.Linear(32, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


class ResidualBlocks(nn.Module):
    def __init__(self, channels: int = 16, blocks: int = 2):
        super().__init__()
        self.stem = nn.Conv2d(3, channels, 3, padding=1)
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.Conv2d(channels, channels, 3, padding=1), nn.BatchNorm2d(channels),
                          nn.ReLU(), nn.Conv2d(channels, channels, 3, padding=1),
                          nn.BatchNorm2d(channels))
            for _ in range(blocks)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        for block in self.blocks:
            x = torch.relu(x + block(x))
        return x.mean(dim=(2, 3))


class Encoder(nn.Module):
    def __init__(self, width: int = 64, heads: int = 4, layers: int = 2):
        super().__init__()
        layer = nn.TransformerEncoderLayer(width, heads, dim_feedforward=2 * width,
                                           dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.encoder(x)


class LSTMClassifier(nn.Module):
    def __init__(self, features: int = 32, hidden: int = 64, classes: int = 10):
        super().__init__()
        self.lstm = nn.LSTM(features, hidden, num_layers=2, batch_first=True)
        self.head = nn.Linear(hidden, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(x)
        return self.head(out[:, -1])


class TinyRecommender(nn.Module):
    """DLRM's shape in miniature: sparse ids through an embedding bag, dense features
    through an MLP, their interaction through a top MLP."""

    def __init__(self, rows: int = 1000, width: int = 32, dense: int = 13):
        super().__init__()
        self.embedding = nn.EmbeddingBag(rows, width, mode="mean")
        self.bottom = nn.Sequential(nn.Linear(dense, width), nn.ReLU())
        self.top = nn.Sequential(nn.Linear(2 * width + 1, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, dense: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        sparse = self.embedding(ids)
        bottom = self.bottom(dense)
        interaction = (sparse * bottom).sum(dim=1, keepdim=True)
        return self.top(torch.cat([sparse, bottom, interaction], dim=1))


def mlp(batch_size: int):
    return MLP(), (torch.randn(batch_size, 256),)


def cnn(batch_size: int):
    return CNN(), (torch.randn(batch_size, 3, 32, 32),)


def resnet_blocks(batch_size: int):
    return ResidualBlocks(), (torch.randn(batch_size, 3, 32, 32),)


def transformer_encoder(batch_size: int):
    return Encoder(), (torch.randn(batch_size, 16, 64),)


def lstm(batch_size: int):
    return LSTMClassifier(), (torch.randn(batch_size, 12, 32),)


def recommender(batch_size: int):
    return TinyRecommender(), (torch.randn(batch_size, 13), torch.randint(0, 1000, (batch_size, 4)))
