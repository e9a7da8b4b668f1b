"""Rendering results: terminal tables and stored-run reports (md, json, csv, html)."""
