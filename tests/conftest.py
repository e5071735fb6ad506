import onnxruntime as ort

ort.set_default_logger_severity(3)
