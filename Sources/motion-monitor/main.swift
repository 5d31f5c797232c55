import IIOMotion
print("motion-monitor (libiio \(libiioVersion))")
