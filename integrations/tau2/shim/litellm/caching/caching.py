"""litellm.caching.caching stand-in: tau2 builds a Cache only when LLM_CACHE_ENABLED is set (it is not here)."""


class Cache:
    def __init__(self, *args, **kwargs):
        raise NotImplementedError("the litellm stand-in has no cache: leave tau2's LLM cache disabled")
