import orjson
from django import template
from django.utils.html import format_html
from django.utils.safestring import mark_safe

from dashboards import families, filters

register = template.Library()
# As Django's json_script escapes: nothing in the JSON can end the script element.
_SCRIPT_ESCAPES = (("&", "\\u0026"), ("<", "\\u003C"), (">", "\\u003E"))


@register.filter
def figure_script(value, element_id):
    """`json_script` for big figures: orjson and str.replace are many times faster than
    json.dumps and str.translate on a megabyte of points (NaN becomes null)."""
    text = orjson.dumps(value, option=orjson.OPT_SERIALIZE_NUMPY).decode()
    for char, escaped in _SCRIPT_ESCAPES:
        text = text.replace(char, escaped)
    return format_html('<script id="{}" type="application/json">{}</script>', element_id,
                       mark_safe(text))


@register.simple_tag
def family_pages():
    """The registered family pages, in nav order: `{% family_pages as pages %}`."""
    return families.pages()


@register.filter
def short_sha(sha):
    """A hex sha cut to 10 characters; an ad-hoc job's `adhoc-job-ID` or a ref whole."""
    return filters.short_sha(sha)


@register.filter
def get(mapping, key):
    return mapping.get(key, "") if mapping else ""


@register.simple_tag
def table_url(state, table_name, fmt="csv"):
    return state.url(format=fmt, table=table_name)


@register.filter
def split(text):
    return text.split()


@register.filter
def words(name):
    """An identifier as words: "missing_in_base" -> "missing in base"."""
    return str(name).replace("_", " ")


@register.filter
def signed_percent(value: float | None) -> str:
    """0.123 -> "+12.3 %"."""
    return "" if value is None else f"{value * 100:+.1f} %"
