/// One value per sensor kind, stored inline (no allocation), read and written by kind: the one
/// encoding of per-kind state in the streaming core.
struct PerSensor<Value> {
    var accelerometer: Value
    var gyroscope: Value
    var magnetometer: Value

    /// The same value for every kind.
    init(repeating value: Value) {
        accelerometer = value
        gyroscope = value
        magnetometer = value
    }

    /// A value made for each kind.
    init(_ make: (SensorKind) -> Value) {
        accelerometer = make(.accelerometer)
        gyroscope = make(.gyroscope)
        magnetometer = make(.magnetometer)
    }

    subscript(kind: SensorKind) -> Value {
        get {
            switch kind {
            case .accelerometer: accelerometer
            case .gyroscope: gyroscope
            case .magnetometer: magnetometer
            }
        }
        set {
            switch kind {
            case .accelerometer: accelerometer = newValue
            case .gyroscope: gyroscope = newValue
            case .magnetometer: magnetometer = newValue
            }
        }
    }
}

extension PerSensor: Sendable where Value: Sendable {}
extension PerSensor: Equatable where Value: Equatable {}
