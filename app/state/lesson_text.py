"""The lesson's words, step by step, in English: the catalogs hold them in Chinese too. Each step
names its live view (app.views.lesson draws it), the tool page it belongs to, and a check question.

Fields in braces are numbers the code owns, filled in when a step is shown (app.views.lesson): the
loaded model's ({vocab}, {block}, {d_model}, {d_k}, {heads}, {layers}) and the rest
(`app.state.lesson_numbers`: the Tiny preset the lesson trains, the demo's corpus, the validation
share, the feed-forward width, the KV cache's refill). A number is never typed into the words. Formulas are LaTeX, the same in every language, and are not translated.
"""
from __future__ import annotations

from dataclasses import dataclass

from minigpt import N_

from app.chrome.site import ATTENTION, GENERATE, INSIDE, MODEL, SCALING, TRAIN, Page


@dataclass(frozen=True)
class LessonStep:
    view: str                  # app.views.lesson.VIEWS: the live view beside the words
    page: Page | None          # the tool page that goes further, linked from the step and linking back
    title: str
    body: tuple[str, ...]      # paragraphs
    formula: str | None
    try_this: str
    question: str
    options: tuple[str, ...]
    answer: int                # index into options
    explanation: str           # shown after an answer, right or wrong

    def texts(self) -> tuple[str, ...]:
        """Every message of the step, for the catalogs' check."""
        return (self.title, *self.body, self.try_this, self.question, *self.options, self.explanation)


STEPS = (
    LessonStep(  # 1
        view="next", page=GENERATE,
        title=N_("What the model predicts"),
        body=(
            N_("MiniGPT is a **character-level language model**: it reads text one character at a time and, at "
               "every position, gives each character it knows a probability of being the one that comes next. That"
               " is the only thing it is ever asked to do; writing is this one guess, made again and again."),
            N_("The characters it knows form its **vocabulary**: your model has {vocab} of them and reads at most "
               "{block} characters at once. A trained model piles most of the probability on a few characters that"
               " make sense, while an untrained one spreads it almost evenly."),
        ),
        formula=r"P\left(x_{t+1}\mid x_1, x_2, \dots, x_t\right)",
        try_this=N_("Edit the prompt, for example stop a familiar phrase halfway, and watch the bars move to the "
                    "characters the model expects next."),
        question=N_("Your model knows {vocab} characters. What does it output at each position?"),
        options=(
            N_("The next word from a dictionary"),
            N_("{vocab} probabilities, one for each character it knows, adding up to 1"),
            N_("One whole number from 0 to {last}: the id of the next character"),
        ),
        answer=1,
        explanation=N_("It scores every character it knows and turns the scores into probabilities that add up to "
                       "1; the bars show the largest of them."),
    ),
    LessonStep(  # 2
        view="embed", page=MODEL,
        title=N_("From characters to vectors"),
        body=(
            N_("A network can only do arithmetic, so each character is first replaced by a whole number, its "
               "**id**: its place in the sorted vocabulary. The id then selects one row of a learned table, the "
               "**embedding**, which in your model is a vector of {d_model} numbers."),
            N_("Before going on, that vector is multiplied by √d_model. When training starts the table holds small"
               " numbers (spread about 1/√d_model), so a raw embedding is about 1 long; after the factor it is "
               "about √d_model long, the same order as the sine-and-cosine position vector added next, and neither"
               " signal drowns the other."),
        ),
        formula=r"x_{pos} = E[\,\mathrm{id}\,]\cdot\sqrt{d_{\text{model}}} + PE_{pos}",
        try_this=N_("Type a few characters with one of them repeated: the same character always gets the same id, "
                    "and the column “length × √d_model” is exactly √d_model times the column “length of its "
                    "embedding row”."),
        question=N_("Why is the embedding multiplied by √d_model?"),
        options=(
            N_("So that its size matches the positional encoding added to it"),
            N_("To turn the ids into probabilities"),
            N_("To make the vocabulary larger"),
        ),
        answer=0,
        explanation=N_("Raw embeddings start out short; scaled by √d_model they are about as long as the position "
                       "vectors, so their sum still carries both the character and its place."),
    ),
    LessonStep(  # 3
        view="positions", page=MODEL,
        title=N_("Where each character stands"),
        body=(
            N_("On its own, attention ignores order: the weight it gives a character depends on what the character"
               " is, not on where it stands. So the model adds a **positional encoding** to every embedding: one "
               "fixed vector per position, built from sine and cosine waves, computed by a formula and never "
               "trained."),
            N_("Dimensions 2i and 2i+1 hold a sine and a cosine of the same frequency. The first pairs swing "
               "quickly and tell neighbouring positions apart; the last pairs change so slowly that they only say "
               "roughly how far along the text a character is. Together they give every position its own pattern, "
               "and the similarity of two positions depends only on the distance between them."),
        ),
        formula=r"\begin{gathered}PE_{(pos,\,2i)}=\sin\!\left(\frac{pos}{10000^{2i/d_{\text{model}}}}\right)\\ PE_{(pos,\,2i+1)}=\cos\!\left(\frac{pos}{10000^{2i/d_{\text{model}}}}\right)\end{gathered}",
        try_this=N_("In the heatmap, compare the fast stripes of the first dimensions with the slow ones of the "
                    "last; in the similarity map, follow the bright band along the diagonal, where each position "
                    "looks most like itself and its neighbours."),
        question=N_("What changes from the first dimensions of the positional encoding to the last?"),
        options=(
            N_("The first ones are learned, the last ones fixed"),
            N_("They switch from cosine to sine"),
            N_("The waves get slower (lower frequency)"),
        ),
        answer=2,
        explanation=N_("The wavelength grows with the dimension index, from 2π for the first pair toward 2π × "
                       "10000 for the last, so early dimensions separate neighbours and late ones give the coarse "
                       "position."),
    ),
    LessonStep(  # 4
        view="qkv", page=INSIDE,
        title=N_("Queries, keys and values"),
        body=(
            N_("Inside attention, each position's vector is multiplied by three learned matrices. The **query** q "
               "says what this position is looking for, the **key** k says what a position has to offer, and the "
               "**value** v is what it passes on when it is chosen."),
            N_("The **attention score** of a query and a key is their dot product q·k, large when the two point "
               "the same way. One query's scores against all the keys it may see go through softmax and become "
               "**attention weights**, and the output is the values mixed in those proportions. The whole recipe "
               "is called **scaled dot-product attention**."),
        ),
        formula=r"\mathrm{Attention}(Q,K,V)=\mathrm{softmax}\!\left(\frac{QK^{\top}}{\sqrt{d_k}}\right)V",
        try_this=N_("Move the slider to pick a query position, find the key with the highest score, and follow how"
                    " that score becomes the largest share in the mix of values."),
        question=N_("What is an attention score?"),
        options=(
            N_("The probability of the next character"),
            N_("The dot product of a query and a key, before softmax"),
            N_("The length of a value vector"),
        ),
        answer=1,
        explanation=N_("A score is q·k, how well a query matches a key; only softmax turns the scores into "
                       "weights, and the weights of one row add up to 1."),
    ),
    LessonStep(  # 5
        view="scaling", page=SCALING,
        title=N_("Why divide by √d_k"),
        body=(
            N_("A query and a key have d_k numbers each; in your model d_k = {d_k}. If those numbers are random "
               "with mean 0 and variance 1, q·k is a sum of d_k such products, so its variance is d_k and its "
               "typical size grows like √d_k."),
            N_("Large scores make softmax **saturate**: one key takes nearly all the weight, the rest get almost "
               "none, and the gradients that should teach the model which keys matter nearly vanish. Dividing by "
               "√d_k brings the spread of the scores back to about 1, whatever the size of the attention head."),
        ),
        formula=r"\begin{gathered}\operatorname{Var}(q\cdot k)=\sum_{i=1}^{d_k}\operatorname{Var}(q_i k_i)=d_k\\ \Longrightarrow\quad\operatorname{Var}\!\left(\frac{q\cdot k}{\sqrt{d_k}}\right)=1\end{gathered}",
        try_this=N_("Tick “Without 1/√d_k scaling” and watch the row collapse onto a single key; then read the "
                    "charts below: without the division, the entropy falls and the largest weight climbs toward 1 "
                    "as d_k grows."),
        question=N_("What happens without the division when d_k is large?"),
        options=(
            N_("Every key gets exactly the same weight"),
            N_("The scores shrink toward 0"),
            N_("Softmax saturates: one key takes almost all the weight"),
        ),
        answer=2,
        explanation=N_("The spread of the scores grows like √d_k, and softmax over widely spread scores puts "
                       "nearly all the weight on the largest one, which also starves the gradients."),
    ),
    LessonStep(  # 6
        view="mask", page=ATTENTION,
        title=N_("The causal mask and softmax"),
        body=(
            N_("During training the model predicts every position of a window at once, so it must not peek: "
               "position i may look at positions 0 to i and never further. The **causal mask** makes sure of it by"
               " setting every score above the diagonal to −∞ before the scores are normalised."),
            N_("**Softmax** then exponentiates each score and divides by the sum of its row. Since e to the power "
               "−∞ is 0, a masked key gets an attention weight of exactly 0, and the remaining weights of each row"
               " add up to 1. The first position can see only itself, so all of its weight lands there."),
        ),
        formula=r"\begin{gathered}w_{ij}=\frac{e^{s_{ij}}}{\sum_{m\le i} e^{s_{im}}}\ \ (j\le i)\\ w_{ij}=0\ \ (j>i:\ s_{ij}=-\infty)\end{gathered}",
        try_this=N_("Hover over the heatmap: the cells above the diagonal are empty, the first row is a single "
                    "full cell, and the weights of every row add up to 1."),
        question=N_("Why is the upper triangle of the heatmap empty?"),
        options=(
            N_("Those keys lie in the future, and the mask hides them"),
            N_("The model has not been trained yet"),
            N_("Softmax rounds small weights down to zero"),
        ),
        answer=0,
        explanation=N_("The mask sets the scores of later positions to −∞, and softmax turns −∞ into a weight of "
                       "exactly 0, so no character can see the text it has to predict."),
    ),
    LessonStep(  # 7
        view="heads", page=ATTENTION,
        title=N_("Many heads at once"),
        body=(
            N_("A single attention gives each position only one way of weighting the others. **Multi-head "
               "self-attention** runs several **attention heads** side by side (per layer in your model: {heads}), "
               "each with its own queries, keys and values of d_k = {d_model} / {heads} = {d_k} "
               "numbers."),
            N_("The heads' outputs are joined back into one vector of {d_model} numbers and mixed by a last "
               "matrix, W_O. Splitting the width this way costs about as much as one wide head, but it lets each "
               "head pick up a habit of its own: one may watch the previous character, another the start of a "
               "phrase, another an earlier copy of the same character."),
        ),
        formula=r"\begin{gathered}\mathrm{head}_h=\mathrm{Attention}\!\left(XW^Q_h,\;XW^K_h,\;XW^V_h\right)\\ \mathrm{MultiHead}(X)=\mathrm{Concat}\!\left(\mathrm{head}_1,\dots,\mathrm{head}_H\right)W^O\end{gathered}",
        try_this=N_("Pick a layer and compare its heads: look for one that lights up mostly the cell just left of "
                    "the diagonal (the previous character), and for one whose weights are spread wide."),
        question=N_("How is d_k related to the model's width d_model?"),
        options=(
            N_("d_k = d_model × number of heads"),
            N_("d_k = d_model / number of heads"),
            N_("d_k is always 64"),
        ),
        answer=1,
        explanation=N_("The width is shared out evenly among the heads, so each gets d_model / heads numbers and "
                       "joining them gives back d_model; in your model, {d_model} / {heads} = {d_k}."),
    ),
    LessonStep(  # 8
        view="ffn", page=MODEL,
        title=N_("Feed-forward, residuals and Pre-LN"),
        body=(
            N_("Once attention has gathered information from other positions, a **feed-forward network** works on "
               "each position by itself: a linear layer widens the vector from d_model to d_ff numbers "
               "({ffn_ratio:g} times as many in every preset), GELU bends it, and a second linear layer brings it "
               "back to d_model."),
            N_("Neither part replaces the vector; each adds its result to it. This **residual connection** keeps a"
               " running sum, the **residual stream**, that every block reads from and writes to, and it gives the"
               " gradient a direct road through every layer (your model has {layers}). Inside each branch, **layer normalization** "
               "comes first (Pre-LN), which keeps training steady."),
        ),
        formula=r"\begin{gathered}x \leftarrow x+\mathrm{Attn}\big(\mathrm{LN}(x)\big)\\ x \leftarrow x+\mathrm{FFN}\big(\mathrm{LN}(x)\big)\\ \mathrm{FFN}(x)=\mathrm{GELU}(xW_1+b_1)\,W_2+b_2\end{gathered}",
        try_this=N_("Read the logit lens row by row: it decodes the residual stream after each layer through the "
                    "final normalization and the tied head, so you can see at which layer the right next character"
                    " rises to the top."),
        question=N_("What does a residual connection do?"),
        options=(
            N_("It rescales the vector to mean 0"),
            N_("It throws the attention output away"),
            N_("It adds a block's output to the block's input"),
        ),
        answer=2,
        explanation=N_("The block's result is added to the vector it read, so the original signal and its gradient"
                       " pass straight through even a deep stack."),
    ),
    LessonStep(  # 9
        view="head", page=MODEL,
        title=N_("The tied head and the logits"),
        body=(
            N_("After the last block and a final layer normalization, each position holds a vector of {d_model} "
               "numbers. The output layer takes its dot product with the embedding of every character in the "
               "vocabulary and so produces the **logits**: one raw score for each of the {vocab} characters."),
            N_("This is **weight tying**: the output layer reuses the embedding table instead of learning a second"
               " one, which saves {vocab} × {d_model} parameters. A character becomes likely when the final vector"
               " points the same way as that character's own embedding. **Softmax** then turns the logits into "
               "probabilities."),
        ),
        formula=r"z=\mathrm{LN}(x)\,E^{\top},\qquad p_i=\frac{e^{z_i}}{\sum_{j=1}^{V} e^{z_j}}",
        try_this=N_("Compare the logits with the probabilities: a lead of a few points in the logits turns into a "
                    "wide gap in probability, because softmax exponentiates."),
        question=N_("What does weight tying mean here?"),
        options=(
            N_("The output layer uses the embedding table as its weights"),
            N_("All layers share one matrix"),
            N_("The logits stay fixed during training"),
        ),
        answer=0,
        explanation=N_("One table turns ids into vectors at the input and vectors back into scores at the output, "
                       "so the model keeps one set of character vectors instead of two."),
    ),
    LessonStep(  # 10
        view="loss", page=TRAIN,
        title=N_("Cross-entropy, measured in nats"),
        body=(
            N_("Training needs one number that says how wrong the model is. At each position we take the "
               "probability p the model gave to the character that really came next and compute −ln p; the "
               "**cross-entropy** loss is the mean of these over all positions. A sure and right guess (p = 1) "
               "costs nothing, while a confident miss costs a lot."),
            N_("The logarithm is the natural one, so the loss is measured in **nats** (one nat is about 1.44 "
               "bits). A model that guesses uniformly among your {vocab} characters pays ln {vocab} nats on every "
               "character: that is the line to beat. Raising e to the loss gives the **perplexity**, the number of"
               " characters the model is, on average, as unsure between as a uniform guess."),
        ),
        formula=r"\mathcal{L}=-\frac{1}{N}\sum_{t=1}^{N}\ln p_\theta\!\left(x_{t+1}\mid x_{\le t}\right)",
        try_this=N_("Find the row with the largest −ln p: that is where the model was most surprised; then compare"
                    " the mean loss with the uniform guess shown below the table."),
        question=N_("The model gives the right next character a probability of 0.5. What is the loss there?"),
        options=(
            N_("0.5 nats"),
            N_("2 nats"),
            N_("About 0.69 nats"),
        ),
        answer=2,
        explanation=N_("The loss is −ln p, and −ln 0.5 = ln 2 ≈ 0.69 nats, which is exactly one bit."),
    ),
    LessonStep(  # 11
        view="train", page=TRAIN,
        title=N_("Training: AdamW, clipping, schedule"),
        body=(
            N_("Each training step takes a batch of windows ({tiny_batch} windows of {tiny_block} characters in "
               "the Tiny preset), computes the loss and backpropagates it to get a gradient for every parameter. "
               "The **optimizer**, AdamW, turns gradients into updates: it keeps running averages of each "
               "gradient and of its square (betas {beta1:g} and {beta2:g}), and it shrinks the weights a little "
               "(weight decay {weight_decay:g}) in a step of its own, apart from the gradient."),
            N_("Before the update, **gradient clipping** scales the whole gradient down whenever its norm is "
               "above {grad_clip:.1f}, so that one odd batch cannot fling the weights far. The **learning rate** "
               "follows a schedule: during **warmup** it climbs in a straight line to its peak of {tiny_lr:g}, "
               "then **cosine decay** lowers it smoothly to {tiny_min_lr:g} at the last step. The Tiny preset "
               "runs {tiny_steps} steps, the first {tiny_warmup} of them warmup."),
        ),
        formula=r"\begin{aligned}\eta_t&=\eta_{\max}\,\frac{t+1}{t_w}&&(t<t_w)\\ \eta_t&=\eta_{\min}+\tfrac{1}{2}\left(\eta_{\max}-\eta_{\min}\right)&&\\ &\qquad\times\left(1+\cos\frac{\pi\,(t-t_w)}{T-t_w}\right)&&(t\ge t_w)\end{aligned}",
        try_this=N_("Find where the learning-rate curve turns from its straight climb into the cosine, then press "
                    "the button to train the Tiny preset and watch its loss fall live; it takes seconds."),
        question=N_("What does gradient clipping do?"),
        options=(
            N_("It sets the learning rate to zero during warmup"),
            N_("It scales the gradient down when its norm exceeds a limit"),
            N_("It deletes the weights that have grown too large"),
        ),
        answer=1,
        explanation=N_("When the gradient's overall norm is above the limit ({grad_clip:.1f} here), the whole gradient "
                       "is shrunk to that norm with its direction kept, so one bad batch cannot cause a huge jump."),
    ),
    LessonStep(  # 12
        view="fit", page=TRAIN,
        title=N_("Over- and under-fitting"),
        body=(
            N_("The **training loss** is measured on the text the model learns from, the **validation loss** on "
               "held-out text it never trains on (here the last {val_share:.0%} of the corpus). If both stay high "
               "and close together, the model is **underfitting**: it is too small or has not trained long "
               "enough. If the training loss keeps falling while the validation loss turns upward, it is "
               "**overfitting**: it memorises the text instead of learning its patterns."),
            N_("The reference demo trains on a paragraph of only {demo_chars} characters, {demo_vocab} of them "
               "different, so the held-out part is full of combinations the model has met once or never. On it, a "
               "model pushes its training loss far down by reciting, while its validation loss climbs, often past "
               "ln {demo_vocab} ≈ {demo_uniform:.2f} nats, worse than a uniform guess. More text, dropout, a "
               "smaller model or stopping early are the remedies."),
        ),
        formula=None,
        try_this=N_("Look at the two curves of the Tiny run first, then press the button for the "
                    "{demo_chars}-character corpus and watch the gap open: the training curve keeps sinking while the "
                    "validation curve bends upward."),
        question=N_("The training loss falls while the validation loss rises. What is happening?"),
        options=(
            N_("Overfitting: the model is memorising the training text"),
            N_("Underfitting: the model is too small"),
            N_("The learning rate is too low"),
        ),
        answer=0,
        explanation=N_("Getting better on seen text and worse on unseen text is the mark of memorising, and a "
                       "{demo_chars}-character corpus invites exactly that."),
    ),
    LessonStep(  # 13
        view="sampling", page=GENERATE,
        title=N_("Sampling: temperature, top-k, top-p"),
        body=(
            N_("To write, the model draws one character from its next-character probabilities, appends it and "
               "repeats, which is why generation is called **autoregressive**. The **temperature** T divides the "
               "logits before softmax: below 1 it sharpens the distribution (safer, more repetitive text), above 1"
               " it flattens it (more varied, wilder text), and T = 0 means **greedy decoding**, always the "
               "likeliest character."),
            N_("Two filters can cut off the unlikely tail before the draw. **Top-k sampling** keeps only the k "
               "likeliest characters; **top-p sampling** keeps the fewest likeliest characters whose probabilities"
               " add up to at least p. Either way, the rare characters that make text fall apart can no longer be "
               "drawn."),
        ),
        formula=r"p_i=\frac{e^{z_i/T}}{\sum_{j} e^{z_j/T}}",
        try_this=N_("Compare the three samples, then drag the temperature slider and watch the bars: at low T one "
                    "bar towers over the rest, at high T they even out, and with top-k or top-p set the tail bars "
                    "drop to zero."),
        question=N_("What does a temperature above 1 do?"),
        options=(
            N_("It always picks the likeliest character"),
            N_("It removes all but k characters"),
            N_("It flattens the distribution, so the text becomes more varied"),
        ),
        answer=2,
        explanation=N_("Dividing the logits by a larger T shrinks the differences between them, so softmax spreads"
                       " the probability more evenly and unlikely characters are drawn more often."),
    ),
    LessonStep(  # 14
        view="kv", page=GENERATE,
        title=N_("The KV cache"),
        body=(
            N_("Without a cache, every new character means running the whole context, up to {block} characters, "
               "through every layer again (your model has {layers}), although only the last position's prediction is used. Yet "
               "adding a character never changes the keys and values of the positions before it: thanks to the "
               "causal mask, no position ever looks at a later one."),
            N_("The **KV cache** keeps those keys and values, layer by layer. Each new character then costs one "
               "step for one position: compute its query, key and value, append the key and value to the cache, "
               "and attend over everything stored. The probabilities are the same up to rounding; only the work "
               "per character shrinks. Because the positions are absolute, a full context cannot just drop its "
               "oldest entry, so the app keeps the last {refill:.0%} of it and recomputes their keys and values "
               "once."),
        ),
        formula=None,
        try_this=N_("Generate the {kv_chars} characters both ways and compare the two times; on a model this small "
                    "part of each step is fixed overhead, so the gap widens with longer contexts and bigger models."),
        question=N_("Why can the keys and values of earlier positions be kept?"),
        options=(
            N_("Because they are the same for every text"),
            N_("Because, with the causal mask, adding a character never changes them"),
            N_("Because the model has stopped training"),
        ),
        answer=1,
        explanation=N_("Each position's key and value depend only on that position and the ones before it, so a "
                       "new character at the end leaves them untouched and they can be reused."),
    ),
    LessonStep(  # 15
        view="pages", page=None,
        title=N_("Where to go next"),
        body=(
            N_("You have followed a character all the way from its id, through its embedding, attention and the "
               "stacked layers, to the character sampled after it. Each page of the app takes one part further: "
               "**Train** trains a model of your own and draws its curves, **Generate** writes text one character "
               "at a time, and **Attention** shows where every character looks."),
            N_("**√d_k scaling** reruns the saturation experiment on random queries and keys, **Inside attention**"
               " builds one attention weight step by step and shows what each head does, and **Inside the model** "
               "shows the positions, the embeddings and the prediction layer by layer. **Experiments** lets you "
               "take a part of the model out and measure what it did, and the **Glossary** lists every term in "
               "Chinese and English."),
        ),
        formula=None,
        try_this=N_("Open the page that matches the step you found hardest, and look at the same idea again on "
                    "your own text."),
        question=N_("Which page lets you take a part of the model out and measure the effect?"),
        options=(
            N_("Experiments"),
            N_("Glossary"),
            N_("Generate"),
        ),
        answer=0,
        explanation=N_("Experiments removes a part, such as a head, the positions or the tie between the embedding"
                       " and the output layer, and compares the validation loss before and after."),
    ),
)
