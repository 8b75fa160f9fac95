"""Model providers: the request/response values, the provider protocol, the providers, a registry.

Import from the modules: ``base`` (values and protocol), ``fake``, ``openai`` (Responses and
Chat Completions), ``anthropic``, ``command`` (agent CLIs), ``registry`` (build one from a
``spec.providers`` entry) and ``capabilities``. ``http``, ``wire``, ``endpoint`` and
``credentials`` are the shared plumbing. The agent loop that drives providers through the
effect journal lives in the engine.
"""
