"""Instruction counts of small PyTorch programs, measured with callgrind (see README).

Counting instructions under valgrind rather than timing makes CPU-side overheads repeatable
on noisy, shared machines, so changes of 1% can be told apart from noise.
"""
