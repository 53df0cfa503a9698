"""Analysis of trained or training models: measurements that explain a score rather than produce one."""

from tinygpt.analysis.collapse import attention_grad_norms, prediction_tvd

__all__ = ["attention_grad_norms", "prediction_tvd"]
