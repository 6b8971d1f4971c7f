"""Glossary: the course's terms in every language of the app, searchable either way."""
import streamlit as st

from minigpt import N_

from app import navigation
from app.chrome import charts, site
from app.chrome.i18n import _
from app.chrome.text import md
from app.views import glossary

navigation.open_page(site.GLOSSARY, N_(
    "The terms the pages use, with the words of the course. Search in either language; click a column's header to "
    "sort by it."), lesson_steps=(1,))

table = glossary.glossary_table()
query = st.text_input(_("Search"), key="glossary_search", placeholder=_("for example: attention"))
if query.strip():
    needle = query.strip().casefold()
    table = table[table.apply(lambda row: any(needle in str(cell).casefold() for cell in row), axis=1)]
if table.empty:
    st.info(_("No term matches “{query}”.", query=md(query.strip())))
else:
    charts.swipe_hint("glossary_table")
    st.dataframe(table, hide_index=True, key="glossary_table", width="stretch",
                 height=35 * (len(table) + 1) + 3)  # every term at once: the page is the table
