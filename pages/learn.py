"""Learn page: DP, epsilon, neighbouring datasets, W1 and the mechanisms, with small interactive figures."""

import streamlit as st

import privsyn_core as ps
from pages._support import attack, state
from privsyn_core.mechanisms.hvz23.pmm_tree import noise_plan
from privsyn_core.reporting import figures as F

state.require_entrypoint()
st.title("Learn")

st.header("Differential privacy")
st.write("A mechanism is **epsilon-differentially private** when, for any two *neighbouring* datasets D and D', "
         "and any set S of outputs, P[M(D) in S] <= e^epsilon P[M(D') in S]. Whatever one person contributes, "
         "the output distribution barely changes, so the output reveals little about that person.")
st.write("**Neighbouring datasets.** *Replace-one*: D' changes one record of D (n is public). *Add/remove*: D' "
         "has one record more or fewer. A count changes by 1 under add/remove; under replace-one a histogram "
         "changes by 1 in two cells (sensitivity 2), so its noise is twice as large.")
st.write("**Composition.** Two releases on the same data with epsilon_1 and epsilon_2 are together "
         "(epsilon_1 + epsilon_2)-DP. The ledger in the sidebar adds them up.")

st.subheader("Laplace noise on a count")
cols = st.columns(3)
count = cols[0].slider("true count", 0, 100, 20, key="learn_count")
epsilon = cols[1].select_slider("epsilon", [0.1, 0.2, 0.5, 1.0, 2.0, 5.0], value=1.0, key="learn_eps")
sensitivity = cols[2].radio("sensitivity", [1, 2], horizontal=True, key="learn_sens")
st.plotly_chart(F.laplace_count_figure(count, epsilon, sensitivity), key="learn_laplace")
st.caption("The two distributions are for a dataset and a neighbour whose count differs by the sensitivity: at "
           "every output their ratio is at most e^epsilon. Counts get exact integer (discrete Laplace) noise.")

st.header("Wasserstein distance W1")
st.write("W1 is the least average distance points must travel to turn one distribution into the other. If W1 "
         "between real and synthetic data is small, every 1-Lipschitz statistic (means, many quantiles, smooth "
         "risk scores) agrees up to W1. W1 between two samples of the *same* distribution is not zero: the app "
         "shows this real-vs-real floor next to every value.")

st.header("Hierarchical noise")
st.write("PMM counts the data on a binary tree of boxes. Upper levels hold large counts and can take more noise; "
         "the noise scale shrinks down the tree so that the budgets 1/sigma_j add up to exactly epsilon. The bars "
         "are the scales PMM itself draws its noise with (add/remove neighbours).")
cols = st.columns(3)
depth = cols[0].slider("tree depth r", 1, 16, 10, key="learn_depth")
dim = cols[1].slider("dimension d", 1, 6, 2, key="learn_dim")
eps_tree = cols[2].select_slider("epsilon ", [0.1, 0.5, 1.0, 2.0, 5.0], value=1.0, key="learn_tree_eps")
st.plotly_chart(F.noise_schedule_figure(noise_plan(depth, dim, eps_tree).sigmas), key="learn_schedule")

attack.section()

st.header("The mechanisms")
for spec in ps.list_mechanisms():
    with st.expander(f"{spec.title} [{spec.name}]"):
        st.markdown(f"**Source:** {spec.citation}  \n**Guarantee:** {spec.guarantee}  \n"
                    f"**Data:** {spec.data_kind}; "
                    f"neighbouring: {', '.join(spec.neighbouring)}")
        st.write(spec.description)
        if not spec.is_private:
            st.warning("Not differentially private.")
