"""The agent graph as text (pure, no Textual): the layered layout, the drawing, and
what has travelled each box and arrow."""
