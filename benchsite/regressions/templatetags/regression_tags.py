from django import template

register = template.Library()


@register.filter
def signed_percent(value: float | None) -> str:
    """0.123 -> "+12.3 %"."""
    return "" if value is None else f"{value * 100:+.1f} %"
