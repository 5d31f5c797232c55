import IIOSimKit
