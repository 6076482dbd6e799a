"""Build a custom recipe's torchao config as a worker would, in a process of its own: run by
benchsite.catalog.validation with the recipe's spec mapping as JSON on stdin, it prints one
JSON object: {"checked_with": "torchao X"}, {"field": F, "message": M} (the class or its
arguments refused) or {"note": N} (torch or torchao is not installed). The web process never
imports torch: this script does, and exits."""

from __future__ import annotations

import importlib.util
import json
import sys

from runner.quant.spec import check_custom_recipe

NOT_BUILT = ("torch and torchao are not installed beside the web server: the config class and "
             "its arguments were checked for form only; a worker builds them when it runs")


def build(item: dict) -> dict[str, str]:
    custom = check_custom_recipe(item)  # checked for form by the caller already
    if not all(importlib.util.find_spec(module) for module in ("torch", "torchao")):
        return {"note": NOT_BUILT}
    try:
        custom.config_class()
    except Exception as error:  # any import or type problem is the class path's
        return {"field": "config", "message": describe(error)}
    try:
        custom.resolve().build()
    except Exception as error:  # the constructor's own complaint, verbatim
        return {"field": "kwargs", "message": f"{custom.config} does not accept these "
                                              f"arguments: {describe(error)}"}
    import torchao  # found above; imported by the build already

    return {"checked_with": f"torchao {torchao.__version__}"}


def describe(error: Exception) -> str:
    if isinstance(error, ModuleNotFoundError):
        return f"cannot import: no module named {error.name!r}"
    if isinstance(error, AttributeError):
        return f"cannot import: {error}"
    return f"{type(error).__name__}: {error}"


if __name__ == "__main__":
    print(json.dumps(build(json.load(sys.stdin))))
