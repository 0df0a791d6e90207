class EvalModEvaluator: pass
class EvalModParameters: pass
