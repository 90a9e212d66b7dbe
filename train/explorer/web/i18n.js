// Every label of the Scratchformer explorer, in English and Simplified Chinese (简体中文).
// Loaded by index.html before app.js. Gives:
//   t(key, vars)       the label in the current language, {name} replaced from vars
//   applyI18n(root)    fills every [data-i18n] element's text (and [data-i18n-title] titles)
//   lang()             "en" | "zh"
//   setLanguage(code)  switches and remembers the choice (localStorage "sf-lang")
// The first visit follows the browser's language (zh-* -> Chinese, anything else English).
// A key missing in a language falls back to English and is recorded in
// window.SF_I18N_MISSING (the browser test checks that it stays empty).
'use strict';

const SF_STRINGS = {
  en: {
    'app.title': 'Scratchformer explorer',
    'app.report_badge': 'report',
    'app.report_note': 'A report file: the curves, attention over training and a fixed set of sentences, saved by `scratchformer report`. The views that need a live model (typing a new sentence, inside one step, lessons) need `scratchformer serve`.',
    'app.footer': 'Scratchformer: a from-scratch Transformer you can watch learn.',
    'tab.runs': 'Runs', 'tab.translate': 'Translate', 'tab.attention': 'Attention',
    'tab.step': 'Inside one step', 'tab.training': 'Over training', 'tab.lessons': 'Lessons',
    'model.label': 'Model', 'model.none': 'no trained model (train one, or start serve with --checkpoint)',
    'err.prefix': 'Error:', 'err.network': 'the server did not answer ({url}); is `scratchformer serve` still running?',
    'err.not_json': '{url} answered HTTP {status} with something that is not JSON',
    'err.http': '{url} answered HTTP {status}',
    'err.report_sentence': 'this report holds no data for that sentence',
    'err.report_live': 'this view needs a live model: run `scratchformer serve`',
    'report.sentence': 'sentence (computed when the report was written)',
    'chart.no_data': 'no data yet', 'chart.step': 'step',
    'kind.train': 'train', 'kind.valid': 'valid', 'kind.test': 'test',
    'metric.loss': 'loss (label-smoothed)', 'metric.nll': 'NLL (negative log-likelihood per token)',
    'metric.ppl': 'perplexity = exp(NLL) (log scale)', 'metric.lr': 'learning rate',
    'metric.bleu': 'BLEU (validation, greedy)', 'metric.tokens_per_s': 'target tokens per second',
    'metric.grad_norm': 'gradient norm (before clipping)', 'metric.accuracy': 'accuracy',
    'runs.heading': 'Runs',
    'runs.hint': 'Every run directory under --runs. Tick runs to overlay their curves; the curves grow every 2 s while a training writes metrics.tsv. Click a name to see its config. The train curve is the loss of one batch every train.log_every steps (noisy); valid is the whole validation set at each validation, test (squares) the test set once at the end.',
    'runs.hint.report': 'The runs of this report, as their metrics.tsv stood when the report was written. The train curve is the loss of one batch every train.log_every steps (noisy); valid is the whole validation set at each validation, test (squares) the test set once at the end.',
    'tr.hint.report': 'Pick one of the report\'s sentences: its translation and top-5 alternatives were computed when the report was written (a report file runs no model).',
    'tr.candidates_greedy': 'Translation (greedy: one hypothesis)', 'kind.test_final': 'test (once, at the end)',
    'runs.col.show': 'show', 'runs.col.name': 'run', 'runs.col.arch': 'architecture', 'runs.col.task': 'task',
    'runs.col.rows': 'metric rows', 'runs.col.checkpoints': 'checkpoints', 'runs.col.modified': 'modified',
    'runs.config_of': 'Config of', 'runs.no_config': '(no config.toml)', 'runs.pick': 'click a run name',
    'runs.empty': 'No runs yet. Train one: scratchformer train --config configs/reverse.toml',
    'runs.curves': 'Curves', 'runs.none_shown': 'tick a run to draw its curves',
    'runs.polled': 'last update {time} (every 2 s)',
    'norms.heading': 'Per-layer weight and gradient norms', 'norms.run': 'run',
    'norms.weight_norm': 'weight norm by layer', 'norms.grad_norm': 'gradient norm by layer (log scale)',
    'norms.none': 'No layer_norms.tsv in run {run} (the trainer writes it while it trains).',
    'norms.no_run': 'no run',
    'tr.heading': 'Translate / generate',
    'tr.hint': 'Type a sentence and press Enter. Greedy and beam search give the same text as `scratchformer translate`; sampling draws from the (temperature-scaled, top-k / top-p filtered) distribution. Each output token shows the five most likely tokens at that step.',
    'tr.text': 'input', 'tr.mode': 'mode', 'tr.mode.greedy': 'greedy', 'tr.mode.beam': 'beam search',
    'tr.mode.sample': 'sampling', 'tr.beam': 'beam size', 'tr.length_penalty': 'length penalty (empty: the model\'s, tuned on valid)',
    'tr.temperature': 'temperature', 'tr.top_k': 'top-k (0 = off)', 'tr.top_p': 'top-p',
    'tr.seed': 'seed', 'tr.max_new': 'max new tokens', 'tr.go': 'Translate', 'tr.output': 'output',
    'tr.meta': '{arch} · {n} tokens · {seconds} s', 'tr.source_pieces': 'source pieces',
    'tr.to_attention': 'See its attention →', 'tr.tokens': 'Each output token and its top-5 alternatives',
    'tr.candidates': 'Candidates (beam: every finished hypothesis, best first)',
    'tr.cand.text': 'text', 'tr.cand.score': 'score', 'tr.cand.log_prob': 'log prob', 'tr.cand.length': 'length',
    'at.heading': 'Attention',
    'at.hint': 'Where each token looks. Cross-attention: each output token (left) over the source tokens (right). Encoder and decoder self-attention: each token over the others (the decoder only over earlier ones: the causal mask).',
    'at.text': 'input', 'at.target': 'target (optional: teacher forcing)', 'at.go': 'Show attention',
    'at.stack': 'attention', 'at.layer': 'layer', 'at.head': 'head',
    'at.layer_n': 'layer {i}', 'at.head_n': 'head {i}', 'at.mean_heads': 'mean of the heads',
    'at.head_view': 'Head view', 'at.head_view_hint': 'Hover a token: its lines stay, and the other side is shaded by weight.',
    'at.matrix': 'Weights as cells (rows: queries, columns: keys)',
    'at.model_view': 'Model view: every layer × head',
    'at.model_view_hint': 'Each thumbnail is one head (rows: queries, columns: keys). Click one to open it above.',
    'ab.heading': 'Attention beside attribution',
    'ab.hint': 'Attention says where a head reads from, not how much the output depends on what it read. For the same sentence: how much each source token is credited with each target token by attention, attention rollout, gradient × input and integrated gradients, and how much each head matters (the drop of log p when it is zeroed). Computed with the framework\'s own autograd (a few seconds).',
    'ab.go': 'Compute attribution', 'ab.method': 'method', 'ab.running': 'computing…',
    'ab.m.attention_mean': 'attention, last layer, mean of heads', 'ab.m.rollout': 'attention rollout',
    'ab.m.gradient_input': 'gradient × input', 'ab.m.integrated': 'integrated gradients', 'ab.m.head': 'attention of layer {l}, head {h}',
    'ab.ablation': 'Head ablation', 'ab.ablation_hint': 'Mean drop of log p(target token) when one cross-attention head is zeroed: how much the output needs it.',
    'ab.drop': 'drop of log p', 'ab.cell': 'target {row} ← source {col}: {v}',
    'at.queries': 'queries (attend from)', 'at.keys': 'keys (attend to)', 'at.masked': 'masked (never attended)',
    'at.weight': 'attention weight', 'at.causal': 'causal',
    'at.translation': 'translation: {text}', 'at.teacher_forced': '(teacher forcing: the given target is fed in)',
    'at.cell': '“{q}” → “{k}”: {w}', 'at.cell_masked': '“{q}” → “{k}”: masked',
    'stack.encoder': 'encoder self-attention', 'stack.decoder_self': 'decoder self-attention (causal)',
    'stack.cross': 'cross-attention (decoder → encoder)', 'stack.self': 'self-attention',
    'stack.rnn_alignment': 'alignment α (recurrent decoder → encoder states)',
    'st.heading': 'Inside one step',
    'st.hint': 'One training batch through forward and backward, with a hook on every module: each module\'s output and the gradient dL/d(output) that came back to it. Two models side by side (say pre-LN and post-LN) show how gradient sizes differ by depth.',
    'st.source': 'model', 'st.source.config': 'a config\'s initial weights', 'st.source.run': 'the selected run\'s last checkpoint',
    'st.config': 'config file', 'st.set': 'overrides (one section.key=value a line)',
    'st.batch': 'batch', 'st.seed': 'seed', 'st.values': 'values shown', 'st.go': 'Run one step',
    'st.loss': 'loss {loss}', 'st.batch_info': 'batch: {rows} rows, source length {src}, target length {tgt}, {tokens} tokens',
    'st.config_text': 'effective config',
    'st.depth': 'Gradient size by depth',
    'st.depth_hint': 'Root mean square of the gradient, log scale: of each layer\'s output (dL/d output), of every module\'s output in forward order, and of every parameter. Hover for the path.',
    'st.depth_layers': 'dL/d(output) of each layer (RMS)', 'st.depth_modules': 'dL/d(output) of every module, forward order (RMS)',
    'st.depth_params': 'parameter gradients (RMS)',
    'st.tree': 'Module tree', 'st.show_params': 'parameter gradients',
    'st.tree_hint': 'Click a row for its histogram and first values; ▾ folds a module\'s children. Statistics are over finite values; NaN and Inf are counted in red.',
    'st.col.module': 'module', 'st.col.shape': 'shape', 'st.col.output': 'output', 'st.col.gradient': 'gradient',
    'st.col.mean': 'mean', 'st.col.std': 'std', 'st.col.min': 'min', 'st.col.max': 'max', 'st.col.hist': 'histogram',
    'st.parameter': 'parameter', 'st.first_values': 'first values (rows × columns):', 'st.no_detail': 'nothing recorded',
    'ot.heading': 'Over training',
    'ot.hint': 'A fixed sentence\'s attention at the snapshots the trainer saved at each validation: move the slider to watch the alignment form.',
    'ot.run': 'run', 'ot.play': '▶ play', 'ot.pause': '❚❚ pause',
    'ot.step': 'step {step} (snapshot {i} of {n})',
    'ot.none': 'No attention snapshots in run {run} (snapshots.jsonl is written at validation time).',
    "ckpt.best": "best", "ckpt.last": "last",
    "tour.button": "Tour", "tour.done": "Done",
    "tour.back": "◀ Back",
    "tour.next": "Next ▶",
    "tour.close": "Close",
    "tour.count": "Tour of this page: {i} of {n}",
    "tour.runs.1": "Every training run under --runs is a row. Tick a run to draw its curves; click its name to read the config it was trained with.",
    "tour.runs.2": "The curves: loss, perplexity, learning rate, BLEU… Solid is training, dashed validation, the hollow square the test set. Hover a curve to read its values.",
    "tour.runs.3": "Per-layer norms of the weights and of their gradients: a layer whose gradient is far smaller than the others learns slowly.",
    "tour.translate.1": "Type a German sentence (or one of the run's language) and press Enter. Pick the model at the top right.",
    "tour.translate.2": "Greedy takes the most likely token each step, beam search keeps several hypotheses, sampling draws from the distribution.",
    "tour.translate.3": "Each output token with its five most likely alternatives: how sure the model was at every step.",
    "tour.attention.1": "A sentence, and optionally the target to feed (teacher forcing). Show attention draws every layer and head.",
    "tour.attention.2": "The head view: hover a token to keep only its lines. Cross-attention shows which source word each output word reads.",
    "tour.attention.3": "Every layer × head at once. Click a thumbnail to open it above.",
    "tour.attention.4": "Attention is where a head reads from, not what the output needs: compare it here with rollout, gradient × input, integrated gradients and head ablation.",
    "tour.step.1": "Two models (say pre-LN and post-LN) run the same training batch forward and backward with a hook on every module.",
    "tour.step.2": "The gradient's size by depth: in a post-LN stack it shrinks towards the input, pre-LN keeps it level.",
    "tour.step.3": "Every module's output and the gradient that came back to it: shape, mean, spread, a histogram. Click a row for its first values.",
    "tour.training.1": "The attention of one sentence at every validation the trainer saved: move the slider or press play to watch the alignment form.",
    "tour.training.2": "The weight and gradient norms of every layer over the steps.",
    "tour.lessons.1": "The lecture's claims as demos, in course order. The ones with a time train a small model first.",
    "tour.lessons.2": "The claim, and whether it held on these numbers: the same verdict as `scratchformer demo NAME` prints.",
    "tour.lessons.3": "The figures: hover cells and curves for values. RoPE turns with a slider; the worked example steps one matrix at a time.",
    'ls.heading': 'Lessons',
    'ls.hint': 'The lecture\'s claims as demos, in course order: each runs the same code as `scratchformer demo NAME` and shows its numbers, whether the claim held, and what to look at. Some train a small model first (the time is shown).',
    'ls.running': 'Running {name}… (about {s} s on two cores; it runs once, then everyone gets the same numbers)',
    'ls.holds': '✓ the claim holds on these numbers', 'ls.fails': '✗ the claim does NOT hold on these numbers',
    'ls.numbers': 'Key numbers', 'ls.seconds': '~{s} s',
    'ls.step': 'Step {i} of {n}', 'ls.prev': '◀ Previous', 'ls.next': 'Next ▶',
    'ls.sentence': 'Your sentence (words split at spaces, at most 12)', 'ls.go': 'Compute',
    'ls.cell': '{row} × {col}: {v}', 'ls.pair': 'pair {k}: θ = {theta} rad per position, one turn every {period} positions',
    'ls.position': 'position p', 'ls.play': '▶ Play', 'ls.pause': '❚❚ Pause', 'ls.unknown_figure': 'a figure of an unknown kind: {kind}',
  },
  zh: {
    'app.title': 'Scratchformer 可视化浏览器',
    'app.report_badge': '报告',
    'app.report_note': '这是一个报告文件：训练曲线、训练过程中的注意力以及一组固定句子，由 `scratchformer report` 保存。需要实时模型的视图（输入新句子、单步内部、课程演示）请使用 `scratchformer serve`。',
    'app.footer': 'Scratchformer：一个从零实现、可以看着它学习的 Transformer。',
    'tab.runs': '训练运行', 'tab.translate': '翻译', 'tab.attention': '注意力',
    'tab.step': '单步内部', 'tab.training': '训练过程', 'tab.lessons': '课程演示',
    'model.label': '模型', 'model.none': '没有已训练的模型（先训练一个，或用 --checkpoint 启动 serve）',
    'err.prefix': '错误：', 'err.network': '服务器没有响应（{url}）；`scratchformer serve` 还在运行吗？',
    'err.not_json': '{url} 返回 HTTP {status}，但内容不是 JSON',
    'err.http': '{url} 返回 HTTP {status}',
    'err.report_sentence': '此报告中没有该句子的数据',
    'err.report_live': '此视图需要实时模型：请运行 `scratchformer serve`',
    'report.sentence': '句子（生成报告时计算）',
    'chart.no_data': '暂无数据', 'chart.step': '步数',
    'kind.train': '训练', 'kind.valid': '验证', 'kind.test': '测试',
    'metric.loss': '损失（标签平滑）', 'metric.nll': '负对数似然 NLL（每个词元）',
    'metric.ppl': '困惑度 = exp(NLL)（对数坐标）', 'metric.lr': '学习率',
    'metric.bleu': 'BLEU（验证集，贪心解码）', 'metric.tokens_per_s': '每秒目标词元数',
    'metric.grad_norm': '梯度范数（裁剪前）', 'metric.accuracy': '准确率',
    'runs.heading': '训练运行',
    'runs.hint': '--runs 下的每个运行目录。勾选多个运行可叠加曲线；训练写入 metrics.tsv 时，曲线每 2 秒增长一次。点击名称查看其配置。训练曲线是每 train.log_every 步记录一个批次的损失（有噪声）；验证曲线是每次验证时整个验证集的结果，测试（方块）是训练结束时在测试集上的一次结果。',
    'runs.hint.report': '本报告中的运行，metrics.tsv 为生成报告时的内容。训练曲线是每 train.log_every 步记录一个批次的损失（有噪声）；验证曲线是每次验证时整个验证集的结果，测试（方块）是训练结束时在测试集上的一次结果。',
    'tr.hint.report': '选择报告中的一个句子：它的译文和前 5 个候选是在生成报告时计算的（报告文件不运行模型）。',
    'tr.candidates_greedy': '译文（贪心解码：只有一个假设）', 'kind.test_final': '测试（训练结束时一次）',
    'runs.col.show': '显示', 'runs.col.name': '运行', 'runs.col.arch': '架构', 'runs.col.task': '任务',
    'runs.col.rows': '指标行数', 'runs.col.checkpoints': '检查点', 'runs.col.modified': '修改时间',
    'runs.config_of': '配置：', 'runs.no_config': '（没有 config.toml）', 'runs.pick': '点击一个运行名称',
    'runs.empty': '还没有运行。先训练一个：scratchformer train --config configs/reverse.toml',
    'runs.curves': '曲线', 'runs.none_shown': '勾选一个运行以绘制曲线',
    'runs.polled': '最近更新 {time}（每 2 秒）',
    'norms.heading': '各层权重范数与梯度范数', 'norms.run': '运行',
    'norms.weight_norm': '各层权重范数', 'norms.grad_norm': '各层梯度范数（对数坐标）',
    'norms.none': '运行 {run} 中没有 layer_norms.tsv（训练器在训练时写入）。',
    'norms.no_run': '没有运行',
    'tr.heading': '翻译 / 生成',
    'tr.hint': '输入一个句子并按回车。贪心解码和束搜索给出与 `scratchformer translate` 相同的结果；采样则从（经温度缩放、top-k / top-p 过滤的）分布中抽取。每个输出词元都显示该步概率最高的五个词元。',
    'tr.text': '输入', 'tr.mode': '解码方式', 'tr.mode.greedy': '贪心', 'tr.mode.beam': '束搜索',
    'tr.mode.sample': '采样', 'tr.beam': '束宽', 'tr.length_penalty': '长度惩罚（留空：用模型在验证集上调好的）',
    'tr.temperature': '温度', 'tr.top_k': 'top-k（0 = 关闭）', 'tr.top_p': 'top-p',
    'tr.seed': '随机种子', 'tr.max_new': '最多生成词元数', 'tr.go': '翻译', 'tr.output': '输出',
    'tr.meta': '{arch} · {n} 个词元 · {seconds} 秒', 'tr.source_pieces': '源句子词元',
    'tr.to_attention': '查看它的注意力 →', 'tr.tokens': '每个输出词元及其前 5 个候选',
    'tr.candidates': '候选译文（束搜索：所有完成的假设，最好的在前）',
    'tr.cand.text': '文本', 'tr.cand.score': '得分', 'tr.cand.log_prob': '对数概率', 'tr.cand.length': '长度',
    'at.heading': '注意力',
    'at.hint': '每个词元在看哪里。交叉注意力：每个输出词元（左）对源句子词元（右）的权重。编码器和解码器自注意力：每个词元对其他词元的权重（解码器只能看前面的词元：因果掩码）。',
    'at.text': '输入', 'at.target': '目标（可选：教师强制）', 'at.go': '显示注意力',
    'at.stack': '注意力', 'at.layer': '层', 'at.head': '头',
    'at.layer_n': '第 {i} 层', 'at.head_n': '第 {i} 头', 'at.mean_heads': '各头平均',
    'at.head_view': '单头视图', 'at.head_view_hint': '将鼠标悬停在一个词元上：只保留它的连线，另一侧按权重着色。',
    'at.matrix': '权重矩阵（行：查询，列：键）',
    'at.model_view': '模型视图：所有层 × 头',
    'at.model_view_hint': '每个缩略图是一个注意力头（行：查询，列：键）。点击即可在上方打开。',
    'ab.heading': '注意力与归因',
    'ab.hint': '注意力说明一个头从哪里读，而不说明输出有多依赖它读到的东西。对同一个句子：注意力、注意力 rollout、梯度 × 输入和积分梯度各自认为每个源端词元对每个目标词元贡献多少，以及每个头有多重要（把它置零时 log p 的下降）。用框架自己的自动求导计算（几秒钟）。',
    'ab.go': '计算归因', 'ab.method': '方法', 'ab.running': '计算中……',
    'ab.m.attention_mean': '注意力：最后一层各头平均', 'ab.m.rollout': '注意力 rollout',
    'ab.m.gradient_input': '梯度 × 输入', 'ab.m.integrated': '积分梯度', 'ab.m.head': '第 {l} 层第 {h} 个头的注意力',
    'ab.ablation': '头消融', 'ab.ablation_hint': '把一个交叉注意力头置零时，目标词元 log p 的平均下降：输出有多需要它。',
    'ab.drop': 'log p 的下降', 'ab.cell': '目标 {row} ← 源端 {col}：{v}',
    'at.queries': '查询（从这里关注）', 'at.keys': '键（被关注）', 'at.masked': '已屏蔽（永远不被关注）',
    'at.weight': '注意力权重', 'at.causal': '因果',
    'at.translation': '译文：{text}', 'at.teacher_forced': '（教师强制：输入给定的目标）',
    'at.cell': '“{q}” → “{k}”：{w}', 'at.cell_masked': '“{q}” → “{k}”：已屏蔽',
    'stack.encoder': '编码器自注意力', 'stack.decoder_self': '解码器自注意力（因果）',
    'stack.cross': '交叉注意力（解码器 → 编码器）', 'stack.self': '自注意力',
    'stack.rnn_alignment': '对齐 α（循环解码器 → 编码器状态）',
    'st.heading': '单步内部',
    'st.hint': '一个训练批次经过前向和反向传播，每个模块都挂有钩子：每个模块的输出，以及传回它的梯度 dL/d(输出)。并排比较两个模型（例如 pre-LN 与 post-LN），可以看到梯度大小如何随深度变化。',
    'st.source': '模型', 'st.source.config': '配置文件的初始权重', 'st.source.run': '所选运行的最新检查点',
    'st.config': '配置文件', 'st.set': '覆盖项（每行一个 section.key=value）',
    'st.batch': '批次', 'st.seed': '随机种子', 'st.values': '显示的数值个数', 'st.go': '运行一步',
    'st.loss': '损失 {loss}', 'st.batch_info': '批次：{rows} 行，源长度 {src}，目标长度 {tgt}，共 {tokens} 个词元',
    'st.config_text': '生效的配置',
    'st.depth': '梯度大小随深度的变化',
    'st.depth_hint': '梯度的均方根（对数坐标）：每一层的输出（dL/d 输出）、按前向顺序的每个模块的输出、以及每个参数。悬停可查看路径。',
    'st.depth_layers': '每一层的 dL/d(输出)（均方根）', 'st.depth_modules': '每个模块的 dL/d(输出)，前向顺序（均方根）',
    'st.depth_params': '参数梯度（均方根）',
    'st.tree': '模块树', 'st.show_params': '参数梯度',
    'st.tree_hint': '点击一行查看其直方图和前几个数值；▾ 折叠子模块。统计量只计算有限值；NaN 和 Inf 以红色计数。',
    'st.col.module': '模块', 'st.col.shape': '形状', 'st.col.output': '输出', 'st.col.gradient': '梯度',
    'st.col.mean': '均值', 'st.col.std': '标准差', 'st.col.min': '最小值', 'st.col.max': '最大值', 'st.col.hist': '直方图',
    'st.parameter': '参数', 'st.first_values': '前几个数值（行 × 列）：', 'st.no_detail': '没有记录',
    'ot.heading': '训练过程',
    'ot.hint': '一个固定句子在训练器每次验证时保存的快照中的注意力：拖动滑块，观察对齐如何逐渐形成。',
    'ot.run': '运行', 'ot.play': '▶ 播放', 'ot.pause': '❚❚ 暂停',
    'ot.step': '第 {step} 步（快照 {i} / {n}）',
    'ot.none': '运行 {run} 中没有注意力快照（snapshots.jsonl 在验证时写入）。',
    "ckpt.best": "最佳", "ckpt.last": "最新",
    "tour.button": "导览", "tour.done": "完成",
    "tour.back": "◀ 上一步",
    "tour.next": "下一步 ▶",
    "tour.close": "关闭",
    "tour.count": "本页导览：第 {i} 步，共 {n} 步",
    "tour.runs.1": "--runs 下的每个训练运行是一行。勾选一个运行即可画出它的曲线；点击名称可以查看训练它所用的配置。",
    "tour.runs.2": "曲线：损失、困惑度、学习率、BLEU……实线是训练，虚线是验证，空心方块是测试集。把鼠标移到曲线上可以读数。",
    "tour.runs.3": "各层权重及其梯度的范数：梯度比其他层小得多的层学得慢。",
    "tour.translate.1": "输入一个德语句子（或该运行所用语言的句子）并按回车。右上角可以选择模型。",
    "tour.translate.2": "贪心解码每一步取最可能的词元，束搜索同时保留几个假设，采样则从分布中抽取。",
    "tour.translate.3": "每个输出词元及其最可能的五个候选：模型在每一步有多确定。",
    "tour.attention.1": "一个句子，以及可选的目标句（教师强制）。点击显示注意力即可画出每一层、每一个头。",
    "tour.attention.2": "单头视图：悬停在一个词元上只保留它的连线。交叉注意力显示每个输出词读的是哪个源词。",
    "tour.attention.3": "一次看到所有层 × 头。点击缩略图可以在上方打开它。",
    "tour.attention.4": "注意力只说明一个头从哪里读，而不说明输出需要什么：在这里把它与 rollout、梯度 × 输入、积分梯度和头消融对比。",
    "tour.step.1": "两个模型（例如 pre-LN 与 post-LN）对同一个训练批次做前向和反向传播，每个模块都挂着钩子。",
    "tour.step.2": "梯度大小随深度的变化：post-LN 的梯度越靠近输入越小，pre-LN 则基本持平。",
    "tour.step.3": "每个模块的输出和传回它的梯度：形状、均值、离散程度、直方图。点击一行查看前几个数值。",
    "tour.training.1": "训练器每次验证时保存的同一个句子的注意力：拖动滑块或点播放，观察对齐如何形成。",
    "tour.training.2": "各层权重和梯度的范数随训练步数的变化。",
    "tour.lessons.1": "课堂上的结论，按课程顺序排成演示。标有时间的演示要先训练一个小模型。",
    "tour.lessons.2": "结论，以及它在这些数值上是否成立：与 `scratchformer demo NAME` 打印的判定相同。",
    "tour.lessons.3": "图：把鼠标移到格子和曲线上读数。RoPE 可以用滑块转动；手算示例一次展示一个矩阵。",
    'ls.heading': '课程演示',
    'ls.hint': '课堂上的结论，按课程顺序演示：每个演示运行与 `scratchformer demo NAME` 相同的代码，给出它的数值、结论是否成立，以及该看什么。有些演示要先训练一个小模型（会显示大约需要的时间）。',
    'ls.running': '正在运行 {name}……（在两个核上大约 {s} 秒；只运行一次，之后每个人拿到相同的数值）',
    'ls.holds': '✓ 在这些数值上结论成立', 'ls.fails': '✗ 在这些数值上结论不成立',
    'ls.numbers': '关键数值', 'ls.seconds': '约 {s} 秒',
    'ls.step': '第 {i} 步，共 {n} 步', 'ls.prev': '◀ 上一步', 'ls.next': '下一步 ▶',
    'ls.sentence': '你的句子（按空格分词，最多 12 个词）', 'ls.go': '计算',
    'ls.cell': '{row} × {col}：{v}', 'ls.pair': '第 {k} 对：每个位置转 θ = {theta} 弧度，每 {period} 个位置转一圈',
    'ls.position': '位置 p', 'ls.play': '▶ 播放', 'ls.pause': '❚❚ 暂停', 'ls.unknown_figure': '未知类型的图：{kind}',
  },
};

window.SF_I18N_MISSING = new Set();
let sfLang = null;

function detectLanguage() {
  try {
    const saved = window.localStorage.getItem('sf-lang');
    if (saved && SF_STRINGS[saved]) return saved;
  } catch (e) { /* storage blocked (file:// in some browsers): follow the browser */ }
  const nav = (navigator.languages && navigator.languages[0]) || navigator.language || 'en';
  return nav.toLowerCase().startsWith('zh') ? 'zh' : 'en';
}

function lang() {
  if (!sfLang) sfLang = detectLanguage();
  return sfLang;
}

// remember = false at start-up: the browser's language is followed, not stored.
function setLanguage(code, remember = true) {
  sfLang = SF_STRINGS[code] ? code : 'en';
  if (remember) {
    try { window.localStorage.setItem('sf-lang', sfLang); } catch (e) { /* not remembered, still switched */ }
  }
  document.documentElement.lang = sfLang === 'zh' ? 'zh-CN' : 'en';
}

function t(key, vars) {
  let s = SF_STRINGS[lang()][key];
  if (s === undefined) {
    window.SF_I18N_MISSING.add(lang() + ':' + key);
    s = SF_STRINGS.en[key] !== undefined ? SF_STRINGS.en[key] : key;
  }
  if (vars) s = s.replace(/\{(\w+)\}/g, (m, name) => (vars[name] !== undefined ? String(vars[name]) : m));
  return s;
}

// A report file (window.SF_REPORT_DATA) has no live server: a label with a "KEY.report" text
// says what the file shows instead of what a live page does.
function applyI18n(root) {
  const report = typeof window.SF_REPORT_DATA === 'object' && window.SF_REPORT_DATA !== null;
  const strings = SF_STRINGS[lang()] || SF_STRINGS.en;
  for (const e of root.querySelectorAll('[data-i18n]')) {
    const key = e.dataset.i18n;
    e.textContent = t(report && (key + '.report') in strings ? key + '.report' : key);
  }
  for (const e of root.querySelectorAll('[data-i18n-title]')) e.title = t(e.dataset.i18nTitle);
  document.title = t('app.title');
}
