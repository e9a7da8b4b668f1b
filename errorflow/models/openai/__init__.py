"""The openai backend: OpenAI's Chat Completions API and every server that speaks it
(vLLM, Ollama, llama.cpp's server, LM Studio, LiteLLM).

`wire` renders a request and reads a reply (`render`, `reply`), `backend` sends it through
the official SDK, `limits` reads the server's rate-limit headers for the shared limiter.
"""
