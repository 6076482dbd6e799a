from django import template

register = template.Library()


@register.filter
def get(mapping, key):
    return mapping.get(key, "") if mapping else ""


@register.simple_tag
def table_url(state, table_name, fmt="csv"):
    return state.url("", format=fmt, table=table_name)


@register.filter
def split(text):
    return text.split()


@register.filter
def words(name):
    """An identifier as words: "missing_in_base" -> "missing in base"."""
    return str(name).replace("_", " ")
