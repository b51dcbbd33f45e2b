"""CUDA source model on tree-sitter-cuda: parse, query, anchor, edit; CUDA embedded in Python via libcst."""
