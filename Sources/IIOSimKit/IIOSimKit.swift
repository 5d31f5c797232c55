public enum IIOSimKit {}
