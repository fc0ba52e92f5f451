"""A minimal stand-in for the `addict` package (not on this machine's package index), for tau2-bench.

tau2 imports `addict.Dict` in tau2/utils/pydantic_utils.py for update_pydantic_model_with_dict, which only
its telecom domain calls: Dict(d), .update(other) merging nested dicts recursively, .to_dict().
"""


class Dict(dict):
    def __init__(self, *args, **kwargs):
        super().__init__()
        for k, v in dict(*args, **kwargs).items():
            self[k] = Dict(v) if isinstance(v, dict) and not isinstance(v, Dict) else v

    def update(self, *args, **kwargs):
        for k, v in dict(*args, **kwargs).items():
            if isinstance(v, dict) and isinstance(self.get(k), dict):
                if not isinstance(self[k], Dict):
                    self[k] = Dict(self[k])
                self[k].update(v)
            else:
                self[k] = Dict(v) if isinstance(v, dict) and not isinstance(v, Dict) else v

    def to_dict(self):
        return {k: v.to_dict() if isinstance(v, Dict) else v for k, v in self.items()}
