"""Records shaped like today's real writers' output."""

import copy

META = {"repo": "pytorch/ao", "head_branch": "main", "head_sha": "a" * 40,
        "workflow_id": 1001, "run_attempt": 1, "job_id": 2002, "name": "nightly",
        "timestamp": 1_760_000_000}

TORCHAO = {
    "benchmark": {"name": "micro-benchmark api", "mode": "inference", "dtype": "int8wo",
                  "extra_info": {"device": "cuda", "arch": "NVIDIA H100 80GB HBM3",
                                 "torch_compile_mode": "max-autotune"}},
    "model": {"name": "int8wo-1024-1024-1024", "type": "micro-benchmark custom layer",
              "origins": ["torchao"]},
    "metric": {"name": "Fwd Speedup (x)", "benchmark_values": [1.25], "target_value": 0.0,
               "extra_info": {"unit": "x"}},
    "runners": [],
    "dependencies": {},
}

INDUCTOR_ACCURACY = {
    "benchmark": {"name": "TorchInductor", "mode": "training", "dtype": "amp",
                  "extra_info": {"device": "cuda", "arch": "NVIDIA A100-SXM4-40GB"}},
    "model": {"name": "BERT_pytorch", "type": "model", "backend": "inductor",
              "origins": ["torchbench"]},
    "metric": {"name": "accuracy", "benchmark_values": [], "target_value": None,
               "extra_info": {"benchmark_values": ["pass"]}},
}

VLLM = {
    "benchmark": {"name": "vLLM benchmark", "extra_info": {
        "args": {"model": "meta-llama/Meta-Llama-3-8B", "tensor_parallel_size": 1,
                 "max_num_seqs": None, "enable_prefix_caching": True,
                 "nested": {"depth": {"ok": 1.5}}}}},
    "model": {"name": "meta-llama/Meta-Llama-3-8B", "extra_info": {"quantization": None}},
    "metric": {"name": "median_itl_ms", "benchmark_values": ["inf", 12.5], "target_value": 10,
               "extra_info": {"unit": "ms"}},
    "runners": [{"name": "cuda", "type": "NVIDIA H100 80GB HBM3", "gpu_count": 1,
                 "cpu_info": "AMD EPYC", "extra_info": {"driver": "550"}}],
    "dependencies": {"torch": {"version": "2.13.0", "sha": "abc"}},
}

MINIMAL = {"benchmark": {"name": "executorch"}, "model": {"name": "mv3"},
           "metric": {"name": "latency", "benchmark_values": 3.5}}


def record(base=TORCHAO, **top):
    return {**copy.deepcopy(base), **top}
