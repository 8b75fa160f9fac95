"""Model providers: the request/response values, the provider protocol, the fake, a registry.

Import from the modules (``agentctl.providers.base``, ``.fake``, ``.registry``); the agent
loop that drives providers through the effect journal lives in the engine.
"""
