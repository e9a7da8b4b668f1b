def total(daily: dict) -> float:
    return round(sum(float(v) for v in daily.values()), 2)
