def find_module(feature: str) -> dict:
    mods = {"login": "app.auth", "search": "app.search"}
    if feature not in mods:
        raise KeyError(feature)
    return {"module": mods[feature]}


def run_tests(module: str) -> dict:
    if "." not in module:
        raise ValueError(f"module must be a dotted path like 'pkg.mod', got {module!r}")
    return {"passed": 12 if module == "app.auth" else 3, "failed": 0}
