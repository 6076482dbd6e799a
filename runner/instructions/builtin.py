"""The built-in definitions: small, fast programs whose counts show framework overhead
(dispatch, autograd bookkeeping, TorchScript's interpreter) more than arithmetic."""

from __future__ import annotations

from runner.instructions.definitions import Definition, Signature, variants

X = Signature.parse("f(x) -> y")
AB = Signature.parse("f(a, b) -> y")
SQUARE = "x = torch.ones((4, 4))"
PAIR = "a = torch.ones((8, 16))\nb = torch.ones((16, 8))"
PARALLEL = (1, 4)  # thread counts for the programs large enough to be split across threads
MODULE_NUMBER = 100  # modules cost 10-100x a tensor op per call: fewer calls per count

BUILTIN: list[Definition] = [
    Definition("add", setup=SQUARE, stmt="y = x + x", signature=X),
    Definition("mul_scalar", setup=SQUARE, stmt="y = x * 2.0", signature=X),
    Definition("matmul", setup=PAIR, stmt="y = a @ b", signature=AB, threads=PARALLEL),
    Definition("cat", setup="a = torch.ones((4, 4))\nb = torch.ones((2, 4))",
               stmt="y = torch.cat([a, b])", signature=AB),
    Definition("view", setup=SQUARE, stmt="y = x.view(-1)", signature=X),
    *variants("sum", {"all": "y = x.sum()", "dim": "y = x.sum(dim=0)"},
              setup="x = torch.ones((8, 8))", signature=X),
    *variants("index", {"int": "y = x[0]", "slice": "y = x[1:3]", "tensor": "y = x[idx]"},
              setup=f"{SQUARE}\nidx = torch.tensor([0, 2])", signature=X),
    # No signature: eager forward only (its TorchScript and backward cells are skipped).
    Definition("empty", stmt="torch.empty((4, 4))"),
    # Returns a list: neither scriptable, traceable nor differentiable (skipped there).
    Definition("tolist", setup="x = torch.ones((16,))", stmt="y = x.tolist()", signature=X),
    Definition("linear", setup="x = torch.ones((4, 16))", model="torch.nn.Linear(16, 8)",
               signature=X, number=MODULE_NUMBER),
    Definition("conv2d", setup="x = torch.ones((1, 3, 8, 8))", model="torch.nn.Conv2d(3, 4, 3)",
               signature=X, threads=PARALLEL, number=MODULE_NUMBER),
    Definition("layer_norm", setup="x = torch.ones((4, 16))", model="torch.nn.LayerNorm(16)",
               signature=X, number=MODULE_NUMBER),
    Definition("mlp", setup="x = torch.ones((8, 32))", signature=X, threads=PARALLEL,
               number=MODULE_NUMBER,
               model="torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), "
                     "torch.nn.Linear(64, 10))"),
]
