// The words beside each demo on the explorer's Lessons page (demo_texts.h). The English claim lives
// in one place, the registry (demos.cpp); here are the same claim in Chinese and, in both
// languages, what to look at in the demo's figure and why the claim holds there. The texts name
// no measured number: times and losses differ from one machine and run to the next, and the page
// prints the run's own beside them.
//
// The table is an array of plain C strings, so the compiler lays it out before the program starts
// (constant initialisation): no other file's static can ever see it half-built. demo_texts()
// copies it into std::strings the first time it is called.
#include "train/lessons/demo_texts.h"

namespace sf::lessons {

namespace {

struct Entry {
  const char* name;
  const char* claim_zh;
  const char* explain_en;
  const char* explain_zh;
};

// One entry per demo, in the registry's order. Adjacent string literals are one string: a long
// text is split over lines where a space or a Chinese character allows it.
constexpr Entry kEntries[] = {
    {"path-length",
     "循环网络的梯度随距离按几何级数衰减；自注意力一步就能到达每个词元",
     "Both figures plot, on a log scale, the size of the gradient from the last output back to the input t steps "
     "earlier, for a tanh RNN, an LSTM and one self-attention layer on the same inputs: the first at initialisation, "
     "the second after training on a task that needs the first token at the last position. The recurrent lines fall "
     "almost straight on the log axis: every step back multiplies the gradient by one Jacobian dh_t/dh_{t-1}, and "
     "when those are contractions the product shrinks geometrically. The self-attention line stays level, because "
     "y_T = sum_i a_Ti x_i W_v reaches every x_i in one step; after training its largest gradient is the one to the "
     "first token, the token the task needs.",
     "两张图都以对数纵轴画出从最后一个输出回传到 t 步之前那个输入的梯度大小，比较同一组输入上的 tanh RNN、"
     "LSTM 和一层自注意力：第一张是初始化时，第二张是在“最后一个位置要读出第一个词元”的任务上训练之后。"
     "循环网络的曲线在对数坐标下几乎是一条下降的直线：每往回一步，梯度都要乘一个雅可比矩阵 dh_t/dh_{t-1}，"
     "这些矩阵是压缩的，乘积就按几何级数缩小。自注意力的曲线保持水平，因为 y_T = sum_i a_Ti x_i W_v 一步就连到每个 "
     "x_i；训练之后，它最大的梯度正好指向任务需要的第一个词元。"},
    {"parallel",
     "LSTM 的 T 个位置是 T 步互相依赖的链；自注意力的依赖链在任何长度下都一样长",
     "The first figure counts, on the autograd graph, the longest chain of ops that must wait for one another "
     "between the input and the output, against the sequence length T. The LSTM's chain grows with T: h_t needs "
     "h_{t-1}, so its T positions are computed one after another, however many cores there are. Self-attention's "
     "chain is the same at every T: its matrix products grow with T but their number does not, so all positions are "
     "computed at once. The second figure, the forward time on this machine, only illustrates: attention's work "
     "grows with T too (as T^2 for the scores); what does not grow is the chain of steps that must wait.",
     "第一张图在自动求导图上数出从输入到输出之间必须依次等待的最长运算链，横轴是序列长度 T。LSTM 的链随 T 增长："
     "h_t 要等 h_{t-1} 算完，所以不论有多少个核，它的 T 个位置都只能一个接一个地算。自注意力的链在每个 T 下都一样长："
     "它的矩阵乘法随 T 变大，但个数不变，所有位置一次算出。第二张图是本机上的前向时间，仅作参考："
     "注意力的计算量同样随 T 增长（打分按 T^2 增长），不增长的是必须排队等待的那条链。"},
    {"bottleneck",
     "没有注意力时，解码器只能通过一个向量了解源句：句子越长，正确率越低",
     "Two LSTM encoder-decoders of the same width, one without attention and one with Bahdanau's additive attention, "
     "are trained the same number of steps to copy random strings; the figure shows the fraction of symbols each "
     "gets right when greedily decoding fresh strings, by string length "
     "(the dashed mark is the longest length seen in training). Without attention everything the decoder will write "
     "must fit into the one vector it starts from, so its accuracy falls as the strings grow. With attention every "
     "decoder step reads all the encoder states, c_t = sum_i a_ti h_i, and its line falls far less. On real "
     "sentences the same comparison is `scratchformer eval --by-length` of configs/rnn-none.toml and "
     "configs/rnn-additive.toml.",
     "两个宽度相同的 LSTM 编码器-解码器，一个没有注意力，一个带 Bahdanau 的加性注意力，"
     "用同样的步数训练它们复制随机字符串；图中是对新字符串贪心解码时，按字符串长度统计的符号正确率（虚线标出训练中见"
     "过的最大长度）。没有注意力时，解码器要写出的一切都必须装进它起始的那一个向量，所以字符串越长，正确率越低。"
     "有注意力时，解码器每一步都读全部编码器状态，c_t = sum_i a_ti h_i，它的曲线下降得少得多。"
     "在真实句子上做同样的比较，用 `scratchformer eval --by-length` 评估 configs/rnn-none.toml 和 "
     "configs/rnn-additive.toml。"},
    {"alignment",
     "注意力学会了没人教过它的对齐：Bahdanau 注意力的权重峰值落在正在翻译的词上",
     "On the reverse task the true alignment is known: target position t must read source position S - 1 - t, the "
     "anti-diagonal. The first heatmap is Bahdanau's alpha for one string "
     "(rows = target symbols, columns = source symbols), the second a one-layer Transformer's cross-attention "
     "averaged over its heads; the large weights sit on or next to that anti-diagonal. Neither model was ever shown "
     "an alignment: reading the right source symbol lowers the loss, so the weights learn to find it. A peak one "
     "cell off is not a mistake: a bidirectional encoder's state also carries its neighbours.",
     "在反转任务上真实对齐是已知的：目标第 t 个位置应当读源端第 S - 1 - t 个位置，即反对角线。"
     "第一张热力图是一个字符串上 Bahdanau 的 alpha（行 = 目标符号，列 = 源符号），"
     "第二张是单层 Transformer 的交叉注意力（各头平均）；大的权重落在反对角线上或紧挨着它。两个模型都没有见过对齐："
     "读对源端的符号能降低损失，权重就学会了去找它。峰值偏一格并不是错：双向编码器的状态也带着相邻的符号。"},
    {"autograd",
     "张量与自动求导的运作：y = sum(relu(x @ w)) 的前向与反向，dy/dw = x^T [x @ w > 0]",
     "The heatmaps follow the computation: the input x (2 rows of 3 numbers), the weights w, h = x @ w, then the "
     "gradient dy/dw that backward() leaves in w and the same matrix worked out by hand. Read column f of dy/dw: "
     "relu passes the gradient 1 back only where h was positive, and the matmul sends it on to w through x^T, so the "
     "column is the sum of the rows x_b whose h[b, f] is positive, and all zero when neither is. The last two "
     "heatmaps agree entry by entry, up to float32 rounding.",
     "这些热力图按计算的顺序排列：输入 x（2 行，每行 3 个数）、权重 w、h = x @ w，"
     "然后是 backward() 留在 w 中的梯度 dy/dw，以及手算出的同一个矩阵。看 dy/dw 的第 f 列："
     "relu 只在 h 为正的地方把梯度 1 传回去，矩阵乘法再经过 x^T 把它送到 w，"
     "所以这一列就是 h[b, f] 为正的那些行 x_b 之和，两个都不为正时整列为 0。最后两张热力图逐项相等，"
     "差别只在 float32 的舍入误差之内。"},
    {"worked-example",
     "讲义中的手算：X、Q、K、V、打分、除以 sqrt(d_k)、逐行 softmax、A V；以及因果 softmax",
     "The page steps through the notes' computation one matrix at a time: the embeddings X of the sentence's words, "
     "W_Q, W_K, W_V, then Q, K, V, the scores S = Q K^T "
     "(row i, column j: how well word i's query matches word j's key), S / sqrt(d_k), the weights A and the output "
     "O = A V. A is the softmax of each row of S / sqrt(d_k), so every row of A is positive and sums to 1, and each "
     "row of O is an A-weighted average of the rows of V. The last two matrices are the notes' causal softmax: the "
     "scores above the diagonal are blocked (-inf), so each position shares its weight among itself and the "
     "positions before it, and the weights above the diagonal are exactly 0. Every matrix is small enough to check "
     "with a pencil, and `scratchformer demo worked-example --text` takes another sentence.",
     "页面按讲义的顺序一次展示一个矩阵：句中各词的嵌入 X，W_Q、W_K、W_V，然后是 Q、K、V，"
     "打分 S = Q K^T（第 i 行第 j 列：词 i 的查询与词 j 的键有多匹配），S / sqrt(d_k)，权重 A 和输出 O = A V。"
     "A 是 S / sqrt(d_k) 每一行的 softmax，所以 A 的每一行都是正数且和为 1，O 的每一行都是 V 的各行按 A 加权的平均。"
     "最后两个矩阵是讲义中的因果 softmax：对角线以上的分数被遮挡（置为 -inf），"
     "每个位置只在自己和之前的位置之间分配权重，对角线以上的权重恰好为 0。每个矩阵都小到可以用笔核对；"
     "`scratchformer demo worked-example --text` 可以换一个句子。"},
    {"positions",
     "正弦位置编码：PE_p . PE_q 只取决于 p - q，并在 p = q 处最大",
     "The first heatmap is the table itself at full width, one row per position p and one column per dimension: "
     "columns 2k and 2k+1 hold sin(p w_k) and cos(p w_k) with w_k = 10000^(-2k/d_model), so the stripes are narrow "
     "on the left, where the frequency is high, and widen to the right. The second is every dot product PE_p . PE_q: "
     "since sin a sin b + cos a cos b = cos(a - b), each pair of columns contributes cos((p - q) w_k), so the value "
     "depends on p - q alone and is the same along every diagonal. The line plots that closed form, sum_k "
     "cos(m w_k), against the distance m: it is d_model/2 at m = 0, where every term is 1, and smaller at every "
     "other distance, falling off with ripples as the fast frequencies stop agreeing. So a fixed table added to the "
     "embeddings gives attention, whose scores are dot products, a way to sense how far apart two tokens are.",
     "第一张热力图是完整宽度的位置编码表，每行一个位置 p，每列一个维度：第 2k 和 2k+1 列是 sin(p w_k) 和 cos(p w_k)，"
     "w_k = 10000^(-2k/d_model)，所以左边频率高、条纹窄，越往右条纹越宽。第二张是所有的点积 PE_p . PE_q："
     "由 sin a sin b + cos a cos b = cos(a - b)，每对列贡献 cos((p - q) w_k)，所以点积只取决于 p - q，"
     "每条对角线上的值都相同。折线画出这个闭式解 sum_k cos(m w_k) 随距离 m 的变化：m = 0 时每一项都是 1，"
     "值为 d_model/2，其他距离上都更小，并随着高频的几对不再同步而带着起伏下降。所以一张加在嵌入上的固定表，"
     "也让以点积打分的注意力能感知两个词元相隔多远。"},
    {"masks",
     "一个真实批次的填充掩码和因果掩码：每个被遮挡的键得到的注意力权重恰好为 0",
     "The first grid is the source padding mask of a batch of Multi30k sentences of different lengths, one row per "
     "sentence: a shorter sentence is followed by <pad> up to the longest, and those positions are hidden from every "
     "query. The second is the decoder's causal mask: row i may read keys 0..i, so under teacher forcing no position "
     "sees the word it must predict; no separate target padding mask is needed, because the target's pads come last "
     "and the causal mask already hides them from every real token. The three heatmaps after them are the attention "
     "weights of the shortest sentence, for random queries and keys: encoder self-attention and cross-attention "
     "(target queries, source keys) under the padding mask, decoder self-attention under the causal mask. A blocked "
     "score is set to -inf before the softmax and e^-inf = 0, so every hidden cell holds exactly 0, not merely a "
     "small number, and each row still sums to 1.",
     "第一个网格是一批长度不同的 Multi30k 句子的源端填充掩码，每行一句：较短句子的后面用 <pad> 补到最长句的长度，"
     "这些位置对每个查询都隐藏。第二个是解码器的因果掩码：第 i 行只能读键 0..i，所以在教师强制下，"
     "没有一个位置能看到它要预测的那个词；目标端不需要另外的填充掩码，因为目标的 <pad> 都在末尾，"
     "因果掩码已经把它们对每个真实词元隐藏了。后面三张热力图是最短那一句的注意力权重（查询和键是随机的）："
     "编码器自注意力和交叉注意力（目标为查询，源句为键）用填充掩码，解码器自注意力用因果掩码。"
     "被遮挡的分数在 softmax 之前被置为 -inf，而 e^-inf = 0，所以每个被隐藏的格子恰好是 0，而不只是一个很小的数，"
     "每一行的和仍为 1。"},
    {"permutation",
     "没有位置编码时，自注意力对排列是等变的；正弦位置编码或 RoPE 会打破这种等变性",
     "Each bar is max |f(P x) - P f(x)| on a log scale: shuffle the input rows with a permutation P that moves every "
     "position, run the module, and compare with its output shuffled the same way; the table lists the same cases "
     "beside max |f(x)|, the size of the outputs. Without positions "
     "(one MultiHeadAttention in float64 and in float32, and a whole two-layer encoder-only model) the difference is "
     "rounding error: the weights for P x are those for x with rows and columns permuted, so every output row just "
     "moves with its input row. With sinusoidal positions added to x, or RoPE inside the attention, a token's output "
     "depends on where it stands, and the difference is of the order of the outputs themselves.",
     "每根条是对数坐标下的 max |f(P x) - P f(x)|：用一个移动每个位置的排列 P 打乱输入的行，运行模块，"
     "再与按同样方式打乱的输出比较；表格列出同样的情形，并给出输出本身的大小 max |f(x)|。"
     "没有位置编码时（一个 MultiHeadAttention，分别用 float64 和 float32，以及一个完整的两层仅编码器模型），"
     "差别只是舍入误差：P x 的注意力权重就是 x 的权重把行和列一起重排，所以每个输出行只是跟着它的输入行移动。"
     "把正弦位置编码加到 x 上，或在注意力内部使用 RoPE 时，词元的输出取决于它所在的位置，差别和输出本身一样大。"},
    {"collapse",
     "两层权重固定、中间没有非线性的注意力等于一层（A2 A1，V1 V2）；中间加上 ReLU 就不是了",
     "The three heatmaps are the frozen attention weights A1 and A2 (computed once on one input, then fixed) and "
     "their product A2 A1, whose rows again sum to 1: a product of row-stochastic matrices is itself an attention "
     "pattern. The bars measure how far the two-layer stack is from one layer: without a ReLU, A2 (A1 x V1) V2 and "
     "(A2 A1) x (V1 V2) agree to float64 rounding, because matrix products can be regrouped; with a ReLU between "
     "them the map is no longer linear in x, and even the best single layer fitted by least squares misses it. Real "
     "softmax attention recomputes A2 from its own input, so a real stack is not exactly one layer, but its value "
     "path V1 V2 still collapses into one D x D matrix: the FFN's nonlinearity is what makes depth pay.",
     "三张热力图是冻结的注意力权重 A1、A2（在一个输入上算一次，然后固定）和它们的乘积 A2 A1，乘积的每行之和仍为 1："
     "行随机矩阵的乘积本身就是一个注意力模式。条形图衡量两层堆叠离单层有多远：没有 ReLU 时，"
     "A2 (A1 x V1) V2 与 (A2 A1) x (V1 V2) 在 float64 舍入误差内相等，因为矩阵乘法可以重新结合；中间加 ReLU 后，"
     "映射对 x 不再是线性的，用最小二乘拟合出的最好的单层也对不上。真实的 softmax 注意力会根据自己的输入重新计算 A2，"
     "所以真实的堆叠并不严格等于一层，但值的路径 V1 V2 仍然坍缩成一个 D x D 矩阵："
     "让层数真正起作用的是前馈层的非线性。"},
    {"scaling",
     "不除以 sqrt(d_k) 时，随着 d_k 增大 softmax(q.k) 会饱和：熵 -> 0，最大权重 -> 1，梯度 -> 0",
     "Four figures against d_k, for q, k ~ N(0, I) and 16 keys, each with one line for softmax(q.k) and one for "
     "softmax(q.k / sqrt(d_k)): the variance of the scores, the entropy of the weights, the largest weight and the "
     "gradient that reaches q. q.k is a sum of d_k products of variance 1, so unscaled its variance grows like d_k "
     "and the scores spread so far apart that softmax puts almost all the weight on one key: the entropy falls "
     "towards 0 and the largest weight climbs towards 1. Softmax's Jacobian diag(w) - w w^T is then nearly 0, so "
     "almost no gradient reaches q; dividing by sqrt(d_k) keeps the variance at 1, and the scaled lines stay level "
     "at every width.",
     "四张图的横轴都是 d_k，q、k ~ N(0, I)，16 个键，每张图一条线是 softmax(q.k)，另一条是 softmax(q.k / sqrt(d_k))："
     "依次是分数的方差、权重的熵、最大的权重和传回 q 的梯度。q.k 是 d_k 个方差为 1 的乘积之和，"
     "不缩放时方差随 d_k 增长，分数拉得太开，softmax 把几乎全部权重放到一个键上：熵降向 0，最大权重升向 1。"
     "这时 softmax 的雅可比矩阵 diag(w) - w w^T 几乎为 0，几乎没有梯度能传到 q；除以 sqrt(d_k) 让方差保持为 1，"
     "缩放后的曲线在每个宽度下都保持平稳。"},
    {"lookup",
     "注意力是一张软查找表：尖锐的查询返回它那个键的值，落在两个键之间的查询把它们的值混合起来",
     "The four keys are one-hot, so q . k_j is simply coordinate j of q. The first heatmap has one row per query "
     "with its weights on k0..k3, the second the output w V: the query 40 k2 puts essentially all its weight on k2 "
     "and returns v2, as a dictionary would; 4 k2 and 1 k2 are blunter and mix in the other values; 40 (k1 + k2) "
     "splits the weight evenly and returns (v1 + v2) / 2; the zero query weighs every key equally. The third figure "
     "shows the error of q = beta k2 against v2 shrinking as beta grows (the other keys' weight falls like e^-beta), "
     "and the fourth slides the query from k2 to k1: the weight moves over smoothly, which is what makes the lookup "
     "differentiable, and every row of weights is a probability distribution.",
     "四个键都是 one-hot 向量，所以 q . k_j 就是 q 的第 j 个坐标。第一张热力图每行一个查询，"
     "显示它在 k0..k3 上的权重，第二张是输出 w V：查询 40 k2 几乎把全部权重放在 k2 上，返回 v2，就像查字典；"
     "4 k2 和 1 k2 更钝，混入了其他的值；40 (k1 + k2) 把权重平分，返回 (v1 + v2) / 2；零查询对每个键一视同仁。"
     "第三张图显示 q = beta k2 时输出与 v2 的误差随 beta 增大而缩小（其他键的权重按 e^-beta 下降），"
     "第四张图让查询从 k2 移向 k1：权重平滑地转移过去，这正是查找可微的原因，而每一行权重都是一个概率分布。"},
    {"rope",
     "<R_i x, R_j y> 只取决于 j - i；单一频率过了一个周期就会撞车，多个频率不会",
     "The first figure shows how far each pair k of a query or key has turned at position p, by p theta_k: the fast "
     "pairs spin, the slow ones barely move. Rotating both vectors leaves only their difference, R_i^T "
     "R_j = R_{j-i}, so <R_i x, R_j y> depends on j - i alone: the table groups the (i, j) pairs of positions 0..63 "
     "and 1000..1063 by j - i, and within each group the scores agree to rounding. The line figure plots the score "
     "against distance: with one rotating pair of period 2048 it repeats exactly, so distance 2048 (the dashed mark) "
     "cannot be told from distance 0; with all 32 frequencies of a 64-wide head the fast pairs never all come round "
     "together, and no far distance up to 4096 looks as much like 0 as distance 1 does.",
     "第一张图显示在位置 p 上，查询或键的每一对分量 k 转过了多少角度，即 p theta_k：快的几对飞快旋转，"
     "慢的几对几乎不动。两个向量都旋转后只剩下它们的差，R_i^T R_j = R_{j-i}，所以 <R_i x, R_j y> 只取决于 j - i："
     "表格把位置 0..63 和 1000..1063 中的 (i, j) 对按 j - i 分组，同一组内的分数在舍入误差内相同。"
     "折线图画出分数随距离的变化：只有一对周期为 2048 的旋转分量时，分数精确地重复，距离 2048（虚线）"
     "与距离 0 无法区分；用 64 维头的全部 32 个频率时，快的几对永远不会同时转回原处，"
     "直到 4096 都没有一个远距离像距离 1 那样接近距离 0。"},
    {"gqa",
     "相同宽度下的 MHA、GQA 与 MQA：参数量、每个词元的 KV 缓存字节数、解码速度",
     "Three decoder-only models of the same width keep all H query heads but have H, H/4 or 1 key/value heads "
     "(MHA, GQA, MQA). The first bars count one self-attention layer's parameters: only k_proj and v_proj shrink "
     "while q_proj and out_proj stay, so the layer shrinks by less than the ratio of heads; the second bars are the "
     "KV-cache bytes each token adds, 2 x layers x Hkv x Dh x 4, which fall exactly in the ratio of Hkv, and the "
     "table checks both formulas against the modules and the allocated cache. The third bars are the decoding speed "
     "measured on this machine, shown but not asserted: fewer key/value heads mean fewer bytes to read at every step "
     "(demo kv-bandwidth), so GQA and MQA usually decode faster, by how much depends on the machine.",
     "三个宽度相同的仅解码器模型都保留全部 H 个查询头，但键/值头分别有 H、H/4 和 1 个（MHA、GQA、MQA）。"
     "第一组条是一个自注意力层的参数量：只有 k_proj 和 v_proj 变小，q_proj 和 out_proj 不变，"
     "所以整层减少的比例小于头数之比；第二组条是每个词元在 KV 缓存中增加的字节数 2 x layers x Hkv x Dh x 4，"
     "它严格按 Hkv 的比例减少，表格把两个公式与模块、与实际分配的缓存逐一核对。第三组条是本机实测的解码速度，只展示、"
     "不断言：键/值头越少，每一步要读的字节越少（见 kv-bandwidth 演示），所以 GQA 和 MQA 通常解码更快，"
     "快多少取决于机器。"},
    {"crossover",
     "短序列受前馈层限制，长序列受注意力限制：实测时间在 T* = d_ff - 2 d_model 附近交叉",
     "Per layer, attention costs 8 T D^2 FLOPs for its four projections plus 4 T^2 D for q k^T and the weighted sum "
     "of the values, the feed-forward block 4 T D F; the two are equal at T* = F - 2 D, the dashed mark. The FLOPs "
     "figure draws these formulas on log-log axes: the FFN's line is straight (proportional to T) while attention's "
     "bends upwards once its T^2 term takes over. The time figure is the measured forward time of one attention "
     "sublayer and one FFN on this machine: the FFN takes longer at the shortest T and attention at the longest, so "
     "the lines cross inside the range. Where exactly they cross depends on how many FLOP/s each kernel reaches, so "
     "the measured crossing can come before or after the formula's T*.",
     "每一层中，注意力的四个投影要 8 T D^2 次浮点运算，q k^T 和对值的加权求和再要 4 T^2 D，前馈层要 4 T D F；"
     "两者在 T* = F - 2 D 处相等，即图中的虚线。浮点运算量那张图在双对数坐标上画出这两个公式："
     "前馈层是一条直线（与 T 成正比），注意力的线在 T^2 项占上风后向上弯。"
     "时间那张图是本机上一个注意力子层和一个前馈层前向的实测时间：T 最短时前馈层更慢，T 最长时注意力更慢，"
     "所以两条线在范围内相交。交点的确切位置取决于各自的内核每秒能跑多少次浮点运算，"
     "所以实测交点可能在公式的 T* 之前，也可能在它之后。"},
    {"extrapolation",
     "在长度 L 上训练、在 4L 上测试：看每种位置编码的损失越过 L 之后如何变化；可学习的位置编码直接拒绝",
     "Small decoder-only models learn the next character of Multi30k English on windows of at most L characters, one "
     "model per position scheme, and are then scored on windows of 4L: each line is the loss by position, and the "
     "dashed mark is L. Past it absolute schemes meet positions they never trained on and relative ones distances "
     "they never saw; the learned table has only L rows, so that model refuses rather than invent vectors, and its "
     "line stops at L. The lines rope + interpolation and rope + ntk are the same trained RoPE model with its "
     "frequencies rescaled at evaluation, squeezing positions up to 4L into the angles it saw up to L. Read the "
     "table's rise past L together with the loss before L: a model that is poor everywhere also rises little.",
     "几个小的仅解码器模型在 Multi30k 英文上学习预测下一个字符，每种位置编码一个模型，训练窗口最长 L 个字符，"
     "然后在长 4L 的窗口上评分：每条线是按位置的损失，虚线标出 L。越过 L 之后，绝对位置编码遇到训练中从未见过的位置，"
     "相对位置编码遇到从未见过的距离；可学习的位置表只有 L 行，所以这个模型宁可拒绝也不编造向量，它的线停在 L。"
     "rope + interpolation 和 rope + ntk 两条线是同一个训练好的 RoPE 模型，只在评估时缩放它的频率，"
     "把直到 4L 的位置压进它在 L 以内见过的角度。看表格中 L 之后的上升时，要同时看 L 之前的损失：一个处处都差的模型，"
     "上升得也少。"},
    {"kv-bandwidth",
     "一个解码步要读完整个 KV 缓存：耗时随字节数增长，GQA/MQA 读得更少；滑动窗口给缓存设了上限",
     "A decoding step computes little, one query per row, but reads every cached key and value once, so its time is "
     "set by how fast memory delivers those bytes. The figure plots the step time against the number of cached "
     "tokens T for MHA, GQA and MQA: at long T it grows with T, and the variants with fewer key/value heads, reading "
     "fewer bytes, lie lower; the first table divides the bytes by the time, to set beside the plain read loop's "
     "bandwidth measured in the same run. The second table shows what a sliding window buys: a ring of W positions "
     "keeps the same bytes however many tokens are generated, while a full cache grows by one position per token.",
     "一个解码步计算很少（每行只有一个查询），却要把缓存的每个键和值读一遍，"
     "所以它的耗时由内存送来这些字节的速度决定。图中画出 MHA、GQA 和 MQA 每步解码的时间随缓存词元数 T 的变化："
     "T 较长时耗时随 T 增长，键/值头越少的变体读的字节越少，线也越低；第一张表用字节数除以时间，"
     "可以与同一次运行中简单读内存循环测出的带宽对照。第二张表展示滑动窗口的作用："
     "大小为 W 的环形缓存不论生成多少词元，占用的字节都不变，而完整的缓存每生成一个词元就增加一个位置。"},
    {"attribution",
     "注意力权重并不天然就是解释：在反转任务（真实对齐已知）和一个训练好的翻译模型（对照人工标注的词对齐）上，"
     "对每个头的注意力、注意力 rollout、梯度 x 输入、积分梯度和头消融打分，看它们有多少次指向真正对齐的源端词元",
     "For every target word each method names the source token it credits most, and the demo scores how often that "
     "is the truly aligned token: on the reverse task, where the alignment is known exactly, and on a trained "
     "translator, against a word alignment annotated by hand. A head's weights say where it reads from, not how much "
     "the output depends on what it read: the value vectors, the other heads, the residual path and the later layers "
     "all stand in between, and a head can attend to a token that hardly matters. Attention rollout multiplies the "
     "layers' weights (with the residual) to follow information through the stack; gradient x input and integrated "
     "gradients measure how the output changes with each source embedding; head ablation switches heads off and "
     "watches what changes. Compare the scores across methods and across the two settings rather than trusting any "
     "single head's picture.",
     "对每个目标词，每种方法都指出它认为贡献最大的源端词元，演示统计这个词元有多少次正是真正对齐的那个："
     "一次在反转任务上（对齐完全已知），一次在训练好的翻译模型上（对照人工标注的词对齐）。"
     "一个头的权重说明它从哪里读，而不说明输出有多依赖它读到的东西：中间隔着值向量、其他的头、残差通路和后面的层，"
     "一个头可能关注一个几乎不起作用的词元。注意力 rollout 把各层的权重（连同残差）相乘，追踪信息在层间的流动；"
     "梯度 x 输入和积分梯度衡量输出随每个源端嵌入如何变化；头消融关掉某些头，看结果有什么变化。要在不同方法之间、"
     "在两种设定之间比较这些得分，而不是只相信某一个头画出来的图。"},
    {"pooling",
     "在真实句子上，用平均池化与注意力池化得到句向量",
     "The bars are each position's weight in the sentence vector of one real Tatoeba sentence, padded to the batch's "
     "length: mean pooling gives 1/T to each of its T tokens, attention pooling gives softmax(q . h_t / sqrt(D)) for "
     "a query vector q, a distribution that can favour some tokens. Both give exactly 0 to the <pad> positions, so "
     "appending pads changes neither sentence vector; the demo checks this, and that the attention weights sum to 1. "
     "The encoder and the query are random, not trained: the bars show the mechanism, not which words matter, and "
     "the table's cosine similarities of paraphrase pairs mostly reflect the words two sentences share.",
     "条形图是一个真实 Tatoeba 句子（补齐到批次长度）的每个位置在句向量中的权重：平均池化给 T 个词元每个 1/T，"
     "注意力池化给出 softmax(q . h_t / sqrt(D))，q 是一个查询向量，这个分布可以偏向某些词元。"
     "两者给 <pad> 位置的权重都恰好为 0，所以追加填充不会改变任何一个句向量；演示检查了这一点，"
     "也检查了注意力权重之和为 1。编码器和查询向量都是随机的、没有训练过：条形图展示的是机制，而不是哪些词重要；"
     "表格中同义句对的余弦相似度主要反映两句共有的词。"},
    {"label-smoothing",
     "使用标签平滑时，损失的最低点是平滑后目标分布的熵，而不是 0",
     "The bars, on a log scale, are five candidate next words of 'A man walks his ...' with dog the gold one: the "
     "smoothed target q puts eps / V on every word and 1 - eps + eps / V on dog (PyTorch's convention); training one "
     "logits vector on the smoothed loss ends at p = q, training it on the plain NLL pushes the other words towards "
     "probability 0. The smoothed loss is H(q) + KL(q || p), so in the line figure it levels off at the dashed H(q), "
     "reached when p = q, while the plain run's NLL keeps falling towards 0 by making the logits ever larger. A "
     "smoothed model is trained never to be fully certain: its loss cannot go below H(q), and a loss curve that "
     "flattens there has finished, not stalled.",
     "条形图（对数坐标）是“A man walks his ...”的五个候选下一个词，正确答案是 dog：平滑后的目标 q 给每个词 eps / V，"
     "给 dog 1 - eps + eps / V（与 PyTorch 的约定相同）；用平滑损失训练一个 logits 向量，最后停在 p = q，"
     "用普通的负对数似然训练，则把其他词的概率推向 0。平滑后的损失等于 H(q) + KL(q || p)，"
     "所以在折线图中它停在虚线 H(q) 上，在 p = q 时取到；而普通训练的负对数似然靠把 logits 越推越大，一直降向 0。"
     "平滑后的模型被训练成永远不完全确定：它的损失不可能低于 H(q)，损失曲线在那里变平说明训练已经到底，而不是卡住了。"},
    {"schedule",
     "先预热再衰减：每种调度都在预热结束时达到峰值；noam 的步数变为四倍时学习率减半",
     "The line figure is the learning rate at every step, from the same Schedule::at the training loop calls, for "
     "the three schedules a config can name: noam rises linearly for w steps and then falls as 1/sqrt(step), "
     "cosine warms up to lr and then follows half a cosine down to min_lr, constant warms up and stays. The "
     "dashed mark is the end of warm-up, where all three peak. Warm-up exists because Adam's first updates, "
     "with its second-moment estimate still near zero, are large and noisy; a small rate at first keeps them from "
     "wrecking the fresh weights.",
     "折线图是每一步的学习率，取自训练循环调用的同一个 Schedule::at，对应配置中可以选择的三种调度："
     "noam 在前 w 步线性上升，之后按 1/sqrt(step) 下降；cosine 预热到 lr 后沿半个余弦降到 min_lr；constant 预热后保持不变。"
     "虚线标出预热结束的位置，三种调度都在那里达到峰值。之所以要预热，是因为 Adam 最初几步的二阶矩估计还接近 0，"
     "更新又大又不稳定；开始时用小的学习率，可以避免它们破坏刚初始化的权重。"},
};

}  // namespace

const std::vector<DemoText>& demo_texts() {
  static const std::vector<DemoText> all = [] {
    std::vector<DemoText> texts;
    for (const Entry& e : kEntries) texts.push_back({e.name, e.claim_zh, e.explain_en, e.explain_zh});
    return texts;
  }();
  return all;
}

const DemoText* find_demo_text(const std::string& name) {
  for (const DemoText& t : demo_texts())
    if (t.name == name) return &t;
  return nullptr;
}

}  // namespace sf::lessons
