"""pages/Scaling.py: the √d_k figures and table show the reference demo's numbers at its settings,
follow every change of the settings, and name the demo only at its settings.

    pytest tests/app/test_scaling_page.py
"""
import numpy as np

from helpers.apptest import home, page, plotly_spec
from helpers.figures import plotly_array
from helpers.maths import DEMO_SCALING
from app.chrome.site import SCALING


def test_the_scaling_caption_names_the_demo_only_at_the_demos_settings():
    at = page(home(), SCALING.script)
    assert any("are the ones the reference demo prints" in c.value for c in at.caption)
    at.slider(key="scaling_seq_len").set_value(32).run()
    assert not any("are the ones the reference demo prints" in c.value for c in at.caption)


def test_scaling_page_default_figure_and_table_show_the_numbers_the_reference_demo_prints():
    at = page(home(), SCALING.script)
    entropy, max_weight = ({t["name"]: plotly_array(t["y"]) for t in plotly_spec(at, i)["data"]} for i in (0, 1))
    d_ks = sorted(DEMO_SCALING)
    expected = np.array([DEMO_SCALING[d] for d in d_ks])  # columns: entropy/max weight, unscaled/scaled
    np.testing.assert_allclose(entropy["no scaling"], expected[:, 0], atol=5e-5)
    np.testing.assert_allclose(max_weight["no scaling"], expected[:, 1], atol=5e-5)
    np.testing.assert_allclose(entropy["scaled by 1/√d_k"], expected[:, 2], atol=5e-5)
    np.testing.assert_allclose(max_weight["scaled by 1/√d_k"], expected[:, 3], atol=5e-5)
    table = at.table[0].value  # the numbers under the table's formatting
    assert table.index.tolist() == d_ks
    np.testing.assert_allclose(table["entropy, no scaling"], expected[:, 0], atol=5e-5)
    np.testing.assert_allclose(table["max weight, scaled"], expected[:, 3], atol=5e-5)


def test_every_scaling_chart_follows_a_change_of_the_settings():
    """The settings rerun only their fragment: the charts under the table, too, must be redrawn from
    the new experiment, not left showing the old one."""
    at = page(home(), SCALING.script)
    at.multiselect(key="scaling_d_ks").set_value([4, 16]).run()
    at.slider(key="scaling_seq_len").set_value(32).run()
    table = at.table[0].value
    assert table.index.tolist() == [4, 16]
    # 32 keys now: scaled scores stay close to uniform, whose entropy is ln 32, above anything 16 keys allow
    assert (np.log(16) < table["entropy, scaled"]).all() and (table["entropy, scaled"] < np.log(32)).all()
    entropy, max_weight, score_std = (plotly_spec(at, i)["data"] for i in range(3))
    for traces in (entropy, max_weight):
        assert [t["x"] for t in traces] == [["d_k=4", "d_k=16"]] * 2
    np.testing.assert_allclose(plotly_array(entropy[0]["y"]), table["entropy, no scaling"])
    np.testing.assert_allclose(plotly_array(max_weight[1]["y"]), table["max weight, scaled"])
    np.testing.assert_allclose(plotly_array(score_std[0]["x"]), [4, 16])
    np.testing.assert_allclose(plotly_array(score_std[0]["y"]), table["std of q·k"])

    at.multiselect(key="scaling_d_ks").set_value([]).run()  # nothing to draw: said, and nothing stale left
    assert not at.exception and [i.value for i in at.info] == ["Choose at least one d_k."]
    assert not at.get("plotly_chart") and not at.table
