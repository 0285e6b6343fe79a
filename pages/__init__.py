"""The Streamlit pages run by ``app.py`` through ``st.navigation`` (a regular package so that mypy can check them:
``mypy app.py pages``).  Streamlit never lists this file: ``st.navigation`` takes the explicit page list, and its
old ``pages/`` auto-discovery skips names that start with an underscore."""
