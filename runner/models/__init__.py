"""Models: the runner's agent loop and its model calls through litellm (loop.py, calls.py), the
scripted reference models served as a litellm provider (scripted.py and its private modules),
the endpoint a command agent's own client calls (endpoint.py), and a real local model,
llama.cpp's server (local.py)."""
