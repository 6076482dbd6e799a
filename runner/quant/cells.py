"""A cell: one recipe on one shape, model type and compile mode - the unit of work.

Cells are plain data so a Celery worker can receive one as a task argument
(`QuantCell.to_dict()` / `QuantCell.from_dict()`); runner.engine.timing_data.TimingSettings
travel the same way.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from runner.contract.names import quant_model_name
from runner.quant.recipes import CustomRecipe, Recipe, resolve
from runner.quant.shapes import Shape


@dataclass(frozen=True)
class QuantCell:
    name: str  # the parameter set's name (torchao's CSV "name" column)
    quantization: str
    sparsity: str | None
    shape: Shape
    model_type: str
    dtype: str  # "bfloat16", "float16" or "float32"
    device: str
    compile_mode: str | None  # None: eager only
    output_dir: str  # where profiler traces and memory snapshots go
    benchmark_mode: str = "inference"
    enable_profiler: bool = False
    enable_memory_profiler: bool = False
    custom_recipe: CustomRecipe | None = None
    # the spec's `timing` (runner.engine.timing_data.TimingSettings overrides); a job's settings win
    timing: dict[str, Any] = field(default_factory=dict, compare=False)

    def recipe(self) -> Recipe:
        if self.custom_recipe is not None:
            return self.custom_recipe.resolve()
        return resolve(self.quantization, self.sparsity)

    @property
    def label(self) -> str:
        """The recipe as records name it: "int8dq", "int8dq+2:4", or a custom recipe's name."""
        if self.sparsity is None:
            return self.quantization
        return f"{self.quantization}+{self.sparsity}"

    @property
    def model_name(self) -> str:
        return quant_model_name(self.label, self.shape.mkn)

    @property
    def key(self) -> str:
        """Identifies the cell within a spec."""
        mode = self.compile_mode or "eager"
        return "/".join(
            [self.name, self.model_type, self.label, self.shape.mkn, self.dtype, self.device, mode]
        )

    @property
    def file_stem(self) -> str:
        return re.sub(r"[^A-Za-z0-9.+-]+", "_", self.key)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["custom_recipe"] = self.custom_recipe.to_dict() if self.custom_recipe else None
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> QuantCell:
        values = dict(data)
        values["shape"] = Shape(**values["shape"])
        custom = values.get("custom_recipe")
        values["custom_recipe"] = CustomRecipe.from_dict(custom) if custom else None
        return cls(**values)
