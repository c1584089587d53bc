import marimo

__generated_with = "0.25.2"
app = marimo.App(width="medium")


@app.cell
def _():
    import marimo as mo

    import attnscope

    return attnscope, mo


@app.cell
def _(mo):
    mo.md("""
    # What does BERT look at? (attnscope in marimo)

    `marimo edit notebooks/quickstart_marimo.py`, or `marimo run` for the app view. The widget is
    live in both: switch the layer, open the other views, click a query token in the Neuron view,
    edit the sentence. The model is the embedded all-MiniLM-L6-v2: no download.
    """)
    return


@app.cell
def _(attnscope):
    model = attnscope.load()
    widget = attnscope.AttentionWidget("The cat sat on the mat because it was tired.", model=model)
    widget
    return (model,)


@app.cell
def _(mo):
    mo.md("""
    ## A long text

    `attention="on_demand"` keeps queries, keys and row log-sum-exps instead of every layer's
    T × T matrix, and computes rows and tiles exactly as you look: the Text and Map views. It is
    how decoder LLMs are shown at 8k–32k tokens (see `long_context.ipynb`).
    """)
    return


@app.cell
def _(attnscope, model):
    long_view = attnscope.AttentionWidget(
        "The keeper fed the lions before the storm, and they slept through it.", model=model, attention="on_demand"
    )
    long_view
    return


@app.cell
def _(mo):
    mo.md("""
    ## The heads' statistics (Clark et al. 2019), as a DataFrame
    """)
    return


@app.cell
def _(attnscope, model):
    stats = attnscope.head_stats(model, ["The cat sat on the mat.", "A dog barked at the mailman.", "She read the book twice."], progress=False)
    stats.head(12)
    return


if __name__ == "__main__":
    app.run()
