"""The checks a scenario passes after its fields validate: references between agents,
tools and needs, the bus and discussion settings, sources, URLs, and how a problem is
explained in the user's words."""
