"""HUD-like dashboard pages rendered with plotly."""
