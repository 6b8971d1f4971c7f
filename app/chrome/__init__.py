"""Chrome: what every page looks like and speaks, knowing nothing of models, runs or classes. The pages'
list (site), the address (url), the language and its catalogs (i18n), safe text (text), remembered
widgets (fields), chart settings (charts), Streamlit's own words translated (streamlit_words). Imports
nothing else of app/."""
