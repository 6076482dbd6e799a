import math

from django import template

register = template.Library()


@register.filter
def cell(value):
    """A table cell: missing values show as missing, never as 0."""
    if value is None or value == "":
        return "—"
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        return f"{value:.4g}" if abs(value) < 1e5 else f"{value:,.0f}"
    return value


@register.filter
def get(mapping, key):
    return mapping.get(key, "") if mapping else ""


@register.simple_tag
def table_url(state, table_name, fmt="csv"):
    return state.url("", format=fmt, table=table_name)


@register.filter
def split(text):
    return text.split()
